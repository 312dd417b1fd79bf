package blackbox

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// DNS response codes (RFC 1035 §4.1.1).
const (
	rcodeServFail = 2
	rcodeNXDomain = 3
)

// dnsResponder is a DNS server on loopback UDP that answers every query with
// no records and the response code chosen for the name asked.
type dnsResponder struct {
	conn    net.PacketConn
	rcodes  map[string]byte // lower-case name with trailing dot → rcode
	mu      sync.Mutex
	queries map[string]int
	done    chan struct{}
}

func newDNSResponder(t *testing.T, rcodes map[string]byte) *dnsResponder {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	d := &dnsResponder{conn: conn, rcodes: rcodes, queries: map[string]int{}, done: make(chan struct{})}
	go d.serve()
	t.Cleanup(func() {
		conn.Close()
		<-d.done
	})
	return d
}

func (d *dnsResponder) serve() {
	defer close(d.done)
	buf := make([]byte, 1500)
	for {
		n, addr, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if res, ok := d.answer(buf[:n]); ok {
			_, _ = d.conn.WriteTo(res, addr)
		}
	}
}

// answer builds the response to query: its header with QR, AA and RA set and
// the chosen response code, its question, and no records.
func (d *dnsResponder) answer(query []byte) ([]byte, bool) {
	const headerLen = 12
	if len(query) < headerLen || binary.BigEndian.Uint16(query[4:6]) != 1 {
		return nil, false // not exactly one question
	}
	name, end, ok := parseName(query, headerLen)
	if !ok || end+4 > len(query) {
		return nil, false
	}
	name = strings.ToLower(name)
	d.mu.Lock()
	d.queries[name]++
	d.mu.Unlock()
	rcode, ok := d.rcodes[name]
	if !ok {
		rcode = rcodeNXDomain
	}

	res := make([]byte, 0, end+4)
	res = append(res, query[:headerLen]...)
	const qr, aa, rdMask, ra = 0x80, 0x04, 0x01, 0x80
	res[2] = qr | aa | query[2]&(0x78|rdMask) // keep opcode and RD
	res[3] = ra | rcode
	binary.BigEndian.PutUint16(res[6:], 0)  // answers
	binary.BigEndian.PutUint16(res[8:], 0)  // authorities
	binary.BigEndian.PutUint16(res[10:], 0) // additionals
	res = append(res, query[headerLen:end+4]...)
	return res, true
}

// parseName reads the uncompressed name at off in msg and returns it in dotted
// form with a trailing dot, and the offset just past it.
func parseName(msg []byte, off int) (string, int, bool) {
	var b strings.Builder
	for {
		if off >= len(msg) {
			return "", 0, false
		}
		n := int(msg[off])
		off++
		if n == 0 {
			break
		}
		if n > 63 || off+n > len(msg) {
			return "", 0, false
		}
		b.Write(msg[off : off+n])
		b.WriteByte('.')
		off += n
	}
	return b.String(), off, true
}

func (d *dnsResponder) count(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.queries[name]
}

// baseWithResolver is an http.Transport whose dialer resolves names with the
// pure Go resolver, sending every DNS query to d.
func baseWithResolver(d *dnsResponder) *http.Transport {
	resolver := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, "udp", d.conn.LocalAddr().String())
		},
	}
	return &http.Transport{DialContext: (&net.Dialer{Resolver: resolver}).DialContext}
}

// TestDNSFailureThroughResolver: NXDOMAIN and SERVFAIL from a responder on
// loopback, through the pure Go resolver, for every kind of request. No
// request leaves the client, so every attempt is retried whatever the method
// or the body (rule 2): 4 attempts, the last error joined with
// ErrRetriesExhausted. The responder answers at once and every attempt fails
// the same way, so the count does not depend on timing.
func TestDNSFailureThroughResolver(t *testing.T) {
	tests := []struct {
		name          string
		giveHost      string
		wantNotFound  bool
		wantTemporary bool
	}{
		{name: "NXDOMAIN", giveHost: "nx.retryhttp.test", wantNotFound: true},
		{name: "SERVFAIL", giveHost: "fail.retryhttp.test", wantTemporary: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runKinds(t, func(t *testing.T, i int, k requestKind) {
				dns := newDNSResponder(t, map[string]byte{
					"nx.retryhttp.test.":   rcodeNXDomain,
					"fail.retryhttp.test.": rcodeServFail,
				})
				base := baseWithResolver(dns)
				t.Cleanup(base.CloseIdleConnections)
				counted := &testkit.CountingTransport{RoundTripper: base}
				var attempts testkit.AttemptRecorder
				tr := testkit.NewTransport(t,
					retryhttp.WithTransport(counted),
					testkit.NoDelay,
					retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool {
						attempts.Record(a)
						return retryhttp.DefaultShouldRetryFn(a)
					}),
				)

				c := callKind(t, tr, k, "http://"+tt.giveHost+"/")

				want := allKinds(4)[i]
				assert.Nil(t, c.res)
				require.Error(t, c.err)
				assert.True(t, retryhttp.IsDNSErr(c.err), "a DNS error: %v", c.err)
				assert.ErrorIs(t, c.err, retryhttp.ErrRetriesExhausted)
				var dnsErr *net.DNSError
				require.True(t, errors.As(c.err, &dnsErr))
				assert.Equal(t, tt.giveHost, dnsErr.Name)
				assert.Equal(t, tt.wantNotFound, dnsErr.IsNotFound)
				assert.Equal(t, tt.wantTemporary, dnsErr.IsTemporary)
				c.assertInvariants(t, counted, nil, want) // no server: no body to compare
				assert.Equal(t, []int{1, 2, 3, 4}, attempts.Get(), "every attempt failed on DNS and was retried")
				assert.GreaterOrEqual(t, dns.count(tt.giveHost+"."), int(want), "each attempt asked the responder")
				if body, ok := c.req.Body.(*testkit.CloseBody); ok {
					assert.True(t, body.Closed.Load(), "the caller's body closed")
				}
			})
		})
	}
}
