package seal_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

func logTo(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// storedKey puts a key into st where an older worker kept it (raw bytes).
func storedKey(t *testing.T, st store.Store) seal.Key {
	t.Helper()
	k := seal.Generate()
	raw, err := base64.StdEncoding.DecodeString(k.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), seal.StoreKey, raw); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestTheEmbeddedDefaultKeepsItsKeyInAFileOfItsOwn: without a configured
// key the key lives in the local file, mode 0600, made once and read back
// on the next start; the store never holds it.
func TestTheEmbeddedDefaultKeepsItsKeyInAFileOfItsOwn(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	file := filepath.Join(t.TempDir(), "data", "seal.key")
	var log bytes.Buffer
	a, err := seal.Open(t.Context(), seal.Source{LocalFile: file}, st, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := st.Get(t.Context(), seal.StoreKey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the store holds the key: %v", err)
	}
	if !strings.Contains(log.String(), "seal key made") {
		t.Errorf("making the key was not said: %s", log.String())
	}
	b, err := seal.Open(t.Context(), seal.Source{LocalFile: file}, st, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	if !b.Verify(a.Sign([]byte("x")), []byte("x")) {
		t.Fatal("a restart made a new key")
	}

	// A file others may read is narrowed, and said so.
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	if _, err := seal.Open(t.Context(), seal.Source{LocalFile: file}, st, logTo(&log)); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 || !strings.Contains(log.String(), "narrowed to 0600") {
		t.Errorf("mode %v after a start, log %q; want 0600 and a warning", fi.Mode().Perm(), log.String())
	}

	// A damaged file is an error that names the file, never a new key.
	if err := os.WriteFile(file, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := seal.Open(t.Context(), seal.Source{LocalFile: file}, st, logTo(&log)); !errors.Is(err, seal.ErrBadKey) || !strings.Contains(err.Error(), file) {
		t.Errorf("damaged key file: %v, want ErrBadKey naming %s", err, file)
	}
}

// TestProcessesSharingOneFileAgree: starts racing on one data dir make
// one key.
func TestProcessesSharingOneFileAgree(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "seal.key")
	keys := make([]seal.Key, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, _, _, err := seal.LoadLocal(file)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for i, k := range keys {
		if !k.Equal(keys[0]) {
			t.Fatalf("start %d made another key", i)
		}
	}
}

// TestAKeyInTheOldStoreLocationMovesOut: an older worker's key in the
// store becomes the local file's (what it sealed still checks) and is
// deleted from the store, said so.
func TestAKeyInTheOldStoreLocationMovesOut(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	old := storedKey(t, st)
	file := filepath.Join(t.TempDir(), "seal.key")
	var log bytes.Buffer
	k, err := seal.Open(t.Context(), seal.Source{LocalFile: file}, st, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	if !k.Verify(old.Sign([]byte("report")), []byte("report")) {
		t.Error("the moved key does not check what the old one sealed")
	}
	if _, err := st.Get(t.Context(), seal.StoreKey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the key is still in the store: %v", err)
	}
	if !strings.Contains(log.String(), "seal key moved out of the state store") {
		t.Errorf("the move was not said: %s", log.String())
	}
	again, err := seal.Open(t.Context(), seal.Source{LocalFile: file}, st, logTo(&log))
	if err != nil || !again.Equal(old) {
		t.Fatalf("after the move: %v, same key %v", err, again.Equal(old))
	}
}

// TestAConfiguredKeyDeletesTheStoredOne: with a configured key the
// stored key is deleted and no longer checks, unless it is the previous
// key of a rotation.
func TestAConfiguredKeyDeletesTheStoredOne(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	old := storedKey(t, st)
	configured := seal.Generate()
	var log bytes.Buffer
	k, err := seal.Open(t.Context(), seal.Source{Key: configured.Encode(), Where: "seal.key_file /s", LocalFile: filepath.Join(t.TempDir(), "seal.key")}, st, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	if !k.Equal(configured) || k.Verify(old.Sign([]byte("x")), []byte("x")) {
		t.Error("not the configured key alone")
	}
	if _, err := st.Get(t.Context(), seal.StoreKey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the key is still in the store: %v", err)
	}
	if !strings.Contains(log.String(), "deleted the key an older worker kept") {
		t.Errorf("the deletion was not said: %s", log.String())
	}

	// A rotation: the previous key's seals check, new seals are the new key's.
	_ = storedKey(t, st)
	rot, err := seal.Open(t.Context(), seal.Source{Key: configured.Encode(), Previous: old.Encode(), LocalFile: filepath.Join(t.TempDir(), "k")}, st, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	if !rot.Verify(old.Sign([]byte("x")), []byte("x")) || !rot.Verify(configured.Sign([]byte("x")), []byte("x")) {
		t.Error("a rotating key does not check both keys' seals")
	}
	if old.Verify(rot.Sign([]byte("x")), []byte("x")) {
		t.Error("a rotating key seals with the previous key")
	}
}

// TestAKeyMustBe32BytesOfBase64: short, long and non-base64 keys are
// refused with what to do.
func TestAKeyMustBe32BytesOfBase64(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", "c2hvcnQ=", "not base64 at all!", strings.Repeat("QUFB", 20)} {
		if _, err := seal.Parse(text); !errors.Is(err, seal.ErrBadKey) || !strings.Contains(err.Error(), "/dev/urandom") {
			t.Errorf("Parse(%q): %v, want ErrBadKey with how to make one", text, err)
		}
	}
	k := seal.Generate()
	for _, text := range []string{k.Encode(), " " + k.Encode() + "\n", strings.TrimRight(k.Encode(), "=")} {
		if got, err := seal.Parse(text); err != nil || !got.Equal(k) {
			t.Errorf("Parse(%q): %v", text, err)
		}
	}
}
