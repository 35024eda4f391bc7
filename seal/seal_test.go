package seal_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/seal"
)

// TestASealBindsSubjectHeadersAndBody: moving a sealed message to another
// subject, changing a sealed header or the body, or cutting parts
// differently, breaks the seal; unsealed headers may change.
func TestASealBindsSubjectHeadersAndBody(t *testing.T) {
	t.Parallel()
	k := seal.NewKey([]byte("0123456789abcdef0123456789abcdef"))
	m := nats.NewMsg("agents.a.inbox")
	m.Data = []byte(`{"text":"done"}`)
	m.Header.Set("Agent-Worker-Via", "subagent")
	m.Header.Set(nats.MsgIdHdr, "sub-1")
	k.SealMsg(m, "Agent-Worker-Via", nats.MsgIdHdr)
	if !k.CheckMsg(m.Subject, m.Header, m.Data, "Agent-Worker-Via", nats.MsgIdHdr) {
		t.Fatal("a sealed message does not check")
	}
	m.Header.Set("X-Other", "free")
	if !k.CheckMsg(m.Subject, m.Header, m.Data, "Agent-Worker-Via", nats.MsgIdHdr) {
		t.Fatal("an unsealed header broke the seal")
	}
	cases := map[string]func(h nats.Header) (string, []byte){
		"another subject": func(nats.Header) (string, []byte) { return "agents.b.inbox", m.Data },
		"another body":    func(nats.Header) (string, []byte) { return m.Subject, []byte(`{"text":"rm -rf"}`) },
		"another id": func(h nats.Header) (string, []byte) {
			h.Set(nats.MsgIdHdr, "sub-2")
			return m.Subject, m.Data
		},
		"no seal": func(h nats.Header) (string, []byte) {
			h.Del(seal.Header)
			return m.Subject, m.Data
		},
		"a forged seal": func(h nats.Header) (string, []byte) {
			h.Set(seal.Header, seal.NewKey([]byte("guess")).Sign([]byte(m.Subject)))
			return m.Subject, m.Data
		},
	}
	for name, change := range cases {
		h := nats.Header{}
		for k, v := range m.Header {
			h[k] = append([]string(nil), v...)
		}
		subject, data := change(h)
		if k.CheckMsg(subject, h, data, "Agent-Worker-Via", nats.MsgIdHdr) {
			t.Errorf("%s: the seal still checks", name)
		}
	}
	if k.Verify(k.Sign([]byte("ab"), []byte("c")), []byte("a"), []byte("bc")) {
		t.Error("parts cut differently seal alike")
	}
	var zero seal.Key
	if zero.Sign([]byte("x")) != "" || zero.Verify("", []byte("x")) {
		t.Error("the zero key seals")
	}
}
