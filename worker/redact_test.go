package worker

import "testing"

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://localhost:6379/0":                             "redis://localhost:6379/0",
		"redis://:hunter2@localhost:6379/0":                    "redis://:xxxxx@localhost:6379/0",
		"rediss://app:hunter2@cache:6380":                      "rediss://app:xxxxx@cache:6380",
		"redis+sentinel://:hunter2@s1:26379,s2:26379/mymaster": "redis+sentinel://:xxxxx@s1:26379,s2:26379/mymaster",
		"nats://": "nats://",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
