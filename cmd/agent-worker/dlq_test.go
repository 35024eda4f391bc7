package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// dlq list prints the kept dead letters as a table; dlq replay posts the
// replay with the reason.
func TestDLQVerbs(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var posted []string
	at := time.Now().Add(-2 * time.Minute).UTC().Format(time.RFC3339)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/agents/oncall/dlq":
			if r.URL.Query().Get("limit") != "5" {
				http.Error(w, `{"error": "limit"}`, http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`{"agent": "oncall", "dead_letters": [{"seq": 42, "agent": "oncall", "id": "disk-1", "reason": "operator_dropped", "at": "` + at + `", "body": "please\ncheck disk", "bytes": 17}]}`))
		case r.Method == http.MethodPost && r.URL.Path == "/v1/agents/oncall/dlq/42/replay":
			mu.Lock()
			posted = append(posted, r.URL.Path)
			mu.Unlock()
			_, _ = w.Write([]byte(`{"replayed": true}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error": "no such dead letter"}`))
		}
	}))
	t.Cleanup(srv.Close)
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"dlq", "list", "oncall", "--limit", "5", "--api", srv.URL}, &out, &errb); code != exitOK {
		t.Fatalf("dlq list: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"42", "disk-1", "operator_dropped", "2m", "please check disk"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dlq list lacks %q:\n%s", want, out.String())
		}
	}
	if code := execute(context.Background(), []string{"dlq", "replay", "oncall", "42", "--api", srv.URL}, &out, &errb); code != exitOK {
		t.Fatalf("dlq replay: exit %d: %s", code, errb.String())
	}
	var gone syncBuffer
	if code := execute(context.Background(), []string{"dlq", "replay", "oncall", "7", "--api", srv.URL}, &out, &gone); code == exitOK || !strings.Contains(gone.String(), "no such dead letter") {
		t.Fatalf("replay of a missing dead letter: exit %d: %s", code, gone.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != 1 {
		t.Fatalf("posted %q", posted)
	}
}
