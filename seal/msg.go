package seal

import "github.com/nats-io/nats.go"

// Header is the NATS header that carries a message's seal.
const Header = "Agent-Worker-Seal"

// SealMsg sets m's seal (Header) over its subject, the values of the named
// headers (in the order given; a missing header seals as empty) and its
// data. Set those headers and the data first. The zero Key removes any
// seal instead.
func (k Key) SealMsg(m *nats.Msg, headers ...string) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	m.Header.Del(Header)
	if s := k.Sign(msgParts(m.Subject, m.Header, m.Data, headers)...); s != "" {
		m.Header.Set(Header, s)
	}
}

// CheckMsg reports whether a message with subject, headers h and data
// carries k's seal over the named headers (as SealMsg made it). A message
// without a seal, or with a seal over another subject, other header values
// or another body, does not check.
func (k Key) CheckMsg(subject string, h nats.Header, data []byte, headers ...string) bool {
	return k.Verify(h.Get(Header), msgParts(subject, h, data, headers)...)
}

func msgParts(subject string, h nats.Header, data []byte, headers []string) [][]byte {
	parts := make([][]byte, 0, 2+2*len(headers))
	parts = append(parts, []byte(subject))
	for _, name := range headers {
		parts = append(parts, []byte(name), []byte(h.Get(name)))
	}
	return append(parts, data)
}
