package inbox

import "testing"

// Take tells the drops since the previous Take once: the next turn hears
// "N older message(s) were dropped", the turn after it does not, whether
// Take takes all or only what fits its budget. (A probe that stopped
// resetting the count in the budgeted Take passed every inbox, driver and
// api test before this one.)
func TestTakeReportsTheDroppedCountOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		maxBytes int
	}{{"everything", 0}, {"a budget", 10}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q := New(1, nil)
			q.Push(Message{ID: "a", Text: "first", Kind: Wake})
			q.Push(Message{ID: "b", Text: "second", Kind: Wake}) // over the cap of 1: a is dropped
			q.Push(Message{ID: "c", Text: "later", Kind: Deferred})
			b := q.Take(c.maxBytes)
			if b.Dropped != 1 || len(b.Messages) == 0 || b.Messages[0].ID != "b" {
				t.Fatalf("first Take: dropped %d, messages %v", b.Dropped, b.Messages)
			}
			q.Push(Message{ID: "d", Text: "next", Kind: Wake})
			if b := q.Take(c.maxBytes); b.Dropped != 0 {
				t.Fatalf("second Take repeats the drop: dropped %d, messages %v", b.Dropped, b.Messages)
			}
		})
	}
}
