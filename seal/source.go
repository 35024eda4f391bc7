package seal

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MakeHint is how an operator makes a key, for error messages and docs.
const MakeHint = "make one with: head -c 32 /dev/urandom | base64"

// ErrBadKey: a key's text is not base64 of 32 bytes.
var ErrBadKey = errors.New("bad seal key")

// Parse reads a key in its text form: base64 (standard or URL alphabet,
// padded or not) of exactly 32 bytes, surrounding whitespace ignored.
func Parse(text string) (Key, error) {
	text = strings.TrimSpace(text)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(text); err == nil {
			if len(b) != keyBytes {
				return Key{}, fmt.Errorf("%w: %d bytes, want %d (base64 of 32 random bytes; %s)", ErrBadKey, len(b), keyBytes, MakeHint)
			}
			return NewKey(b), nil
		}
	}
	return Key{}, fmt.Errorf("%w: not base64 (want base64 of 32 random bytes; %s)", ErrBadKey, MakeHint)
}

// LocalFileMode is the mode of the key file the worker makes itself.
const LocalFileMode fs.FileMode = 0o600

// LoadLocal returns the key in the file at path, which the worker keeps
// for itself (the embedded default's data_dir/seal.key): it makes the
// file, mode 0600, with a new key when there is none (created true), and
// narrows a file others may read to 0600 (narrowed true), saying nothing
// itself: the caller logs both.
func LoadLocal(path string) (k Key, created, narrowed bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k = Generate()
		if err := WriteLocal(path, k); err != nil {
			if errors.Is(err, fs.ErrExist) { // another process made it first
				k, _, narrowed, err = LoadLocal(path)
				return k, false, narrowed, err
			}
			return Key{}, false, false, err
		}
		return k, true, false, nil
	}
	if err != nil {
		return Key{}, false, false, fmt.Errorf("seal key %s: %w", path, err)
	}
	if k, err = Parse(string(data)); err != nil {
		return Key{}, false, false, fmt.Errorf("seal key %s: %w (delete the file, with every replica stopped, to make a new key)", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&^LocalFileMode != 0 {
		if err := os.Chmod(path, LocalFileMode); err != nil {
			return Key{}, false, false, fmt.Errorf("seal key %s is readable by others (mode %v) and cannot be narrowed: %w", path, fi.Mode().Perm(), err)
		}
		narrowed = true
	}
	return k, false, narrowed, nil
}

// WriteLocal writes k to a new file at path, mode 0600, making its
// directory; it fails with fs.ErrExist when the file is there already.
// The file appears whole or not at all.
func WriteLocal(path string, k Key) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("seal key %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".seal-*")
	if err != nil {
		return fmt.Errorf("seal key %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // gone once linked (or on failure)
	err = tmp.Chmod(LocalFileMode)
	if err == nil {
		_, err = tmp.WriteString(k.Encode() + "\n")
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path) // fails if path exists: never overwrites a key
	}
	if err != nil {
		return fmt.Errorf("seal key %s: %w", path, err)
	}
	return nil
}
