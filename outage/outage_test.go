package outage

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestMark(t *testing.T) {
	t.Parallel()
	if Mark("store", nil) != nil {
		t.Fatal("Mark(nil) is not nil")
	}
	cause := context.DeadlineExceeded
	err := fmt.Errorf("record turn: %w", Mark("store", cause))
	if !Is(err) || !errors.Is(err, cause) {
		t.Fatalf("marked error lost its marks: %v", err)
	}
	if got := Dependency(err); got != "store" {
		t.Fatalf("Dependency = %q", got)
	}
	if again := Mark("model provider", err); Dependency(again) != "store" {
		t.Fatalf("re-marking renamed the dependency: %v", again)
	}
	if Is(errors.New("bad request")) || Dependency(errors.New("x")) != "" {
		t.Fatal("an unmarked error reads as an outage")
	}
	if want := "context deadline exceeded"; Mark("store", cause).Error() != want {
		t.Fatalf("text = %q", Mark("store", cause).Error())
	}
}
