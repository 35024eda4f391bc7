package access_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/access"
)

func mustSet(t *testing.T, tokens ...access.Token) *access.Set {
	t.Helper()
	set, err := access.NewSet(tokens)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestSessionResume: a session resumes as its token's caller in any set
// holding the token with the same value (another replica's), follows the
// token's current role and agents, and is refused when altered, expired,
// or its token's value rotated or removed. Its CSRF token is checked
// against the session it was made for only.
func TestSessionResume(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	ops := access.Token{Name: "ops", Role: access.RoleOperate, Value: "ops-secret"}
	dash := access.Token{Name: "dash", Role: access.RoleRead, Value: "dash-secret"}
	set := mustSet(t, ops, dash)
	who, _ := set.Authenticate("ops-secret")
	session, err := set.Session(who, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(session, "ops-secret") {
		t.Fatalf("the session holds the token: %q", session)
	}
	if _, err := set.Session(access.Anonymous, now.Add(time.Hour)); err == nil {
		t.Fatal("a session was signed for the anonymous caller")
	}

	replica := mustSet(t, dash, ops) // another replica, the same tokens
	got, err := replica.Resume(session, now)
	if err != nil || got.Name != "ops" || got.Role != access.RoleOperate || !got.ValidIn(replica) {
		t.Fatalf("resume on another replica: %+v, %v", got, err)
	}
	scoped := mustSet(t, access.Token{Name: "ops", Role: access.RoleRead, Value: "ops-secret", Agents: []string{"pay-*"}})
	if got, err := scoped.Resume(session, now); err != nil || got.Role != access.RoleRead || got.MayAccess("oncall") || !got.MayAccess("pay-eu") {
		t.Fatalf("a session does not follow its token's role and agents: %+v, %v", got, err)
	}

	dashWho, _ := set.Authenticate("dash-secret")
	dashSession, _ := set.Session(dashWho, now.Add(time.Hour))
	p, d := strings.Split(session, "."), strings.Split(dashSession, ".")
	for what, c := range map[string]struct {
		set     *access.Set
		session string
		at      time.Time
		want    error
	}{
		"expired":              {set, session, now.Add(time.Hour), access.ErrSessionExpired},
		"value rotated":        {mustSet(t, access.Token{Name: "ops", Role: access.RoleOperate, Value: "ops-secret-2"}), session, now, access.ErrSessionInvalid},
		"token removed":        {mustSet(t, dash), session, now, access.ErrSessionInvalid},
		"renamed, same value":  {mustSet(t, access.Token{Name: "ops2", Role: access.RoleOperate, Value: "ops-secret"}), session, now, access.ErrSessionInvalid},
		"expiry moved":         {set, strings.Join([]string{p[0], p[1], p[2] + "9", p[3]}, "."), now, access.ErrSessionInvalid},
		"expiry respelled":     {set, strings.Join([]string{p[0], p[1], "0" + p[2], p[3]}, "."), now, access.ErrSessionInvalid},
		"name of another":      {set, strings.Join([]string{p[0], d[1], p[2], p[3]}, "."), now, access.ErrSessionInvalid},
		"mac of another":       {set, strings.Join([]string{p[0], p[1], p[2], d[3]}, "."), now, access.ErrSessionInvalid},
		"mac cut":              {set, session[:len(session)-2], now, access.ErrSessionInvalid},
		"other version":        {set, "s0" + session[2:], now, access.ErrSessionInvalid},
		"a part more":          {set, session + ".x", now, access.ErrSessionInvalid},
		"the token's value":    {set, "ops-secret", now, access.ErrSessionInvalid},
		"empty":                {set, "", now, access.ErrSessionInvalid},
		"expired and altered":  {set, strings.Join([]string{p[0], p[1], p[2], d[3]}, "."), now.Add(2 * time.Hour), access.ErrSessionInvalid},
		"expired on a replica": {replica, session, now.Add(2 * time.Hour), access.ErrSessionExpired},
	} {
		if _, err := c.set.Resume(c.session, c.at); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", what, err, c.want)
		}
	}

	csrf := got.CSRF(session)
	if csrf == "" || !got.CheckCSRF(session, csrf) {
		t.Fatalf("the session's own CSRF token %q is refused", csrf)
	}
	for what, c := range map[string]struct {
		who       access.Caller
		session   string
		presented string
	}{
		"another session":   {got, dashSession, csrf},
		"another's token":   {dashWho, session, csrf},
		"empty":             {got, session, ""},
		"altered":           {got, session, "A" + csrf[1:] + "A"},
		"the anonymous one": {access.Anonymous, session, csrf},
	} {
		if c.who.CheckCSRF(c.session, c.presented) {
			t.Errorf("CSRF check passed for %s", what)
		}
	}
	if access.Anonymous.CSRF(session) != "" {
		t.Fatal("the anonymous caller has a CSRF token")
	}
}
