package quota

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// Contacts is the first-contact gate of a process's hosts: the first send
// to a host the process has not heard from goes alone, and the sends
// asked for meanwhile wait for its answer (at most FirstContactWait), so
// that a quota the host states is known before they go. Without it, a
// process that starts beside others sharing a quota sends its whole
// concurrency blind, into a window they may have spent already. Once the
// host has answered (or the wait ran out), its sends go at once: a look-up
// that takes no lock. Make one with NewContacts. Safe for concurrent use.
type Contacts struct {
	hosts atomic.Pointer[hostmap.Map[*Contact]]
	last  atomic.Pointer[Contact] // the contact last found heard from
}

// MaxContacts bounds the hosts a Contacts remembers; one forgotten is
// gated again at its next contact.
const MaxContacts = 4096

// FirstContactWait bounds the wait of a send for the answer to the first
// send to its host, in real time: a first answer slower than this is not
// waited for (the host is then taken as heard from).
const FirstContactWait = 100 * time.Millisecond

// NewContacts returns an empty Contacts.
func NewContacts() *Contacts {
	cs := &Contacts{}
	cs.Reset()
	return cs
}

// Reset forgets every host cs heard from: each is gated again at its next
// contact.
func (cs *Contacts) Reset() {
	cs.hosts.Store(hostmap.New(MaxContacts, func(k hostmap.Key) *Contact {
		return &Contact{done: make(chan struct{}), host: k.Host}
	}))
	cs.last.Store(nil)
}

// Contact is the gate of one host.
type Contact struct {
	heard   atomic.Bool // the first send was answered, or not waited for
	claimed atomic.Bool // a first send is out
	done    chan struct{}
	host    string // host[:port], as KeyOf spells it (Cold)
}

// Idle reports whether c may be forgotten: its host was heard from.
func (c *Contact) Idle() bool { return c.heard.Load() }

// Busy reports false: a Contact forgotten loses nothing its senders need
// (they keep it).
func (*Contact) Busy() bool { return false }

// Ask returns the gate of req's host, or nil when the host was heard from
// and req goes at once (the usual case).
func (cs *Contacts) Ask(req *http.Request) *Contact {
	hosts := cs.hosts.Load()
	c, ok := hosts.LastOf(req.URL)
	if !ok {
		c = hosts.GetOrCreate(hostmap.KeyOf(req))
	}
	if c.heard.Load() {
		if cs.last.Load() != c {
			cs.last.Store(c)
		}
		return nil
	}
	return c
}

// Cold reports whether a send to u's host may have to pass the gate (Ask):
// false when the host[:port] is the one last found heard from, the usual
// case (a pointer loaded and a string compared; the scheme is not: a
// host:port serves one, and a default port's http and https of one host
// share the gate's answer, which is only a first contact's; a URL that
// spells a default port takes the look-up of Ask).
func (cs *Contacts) Cold(u *url.URL) bool {
	c := cs.last.Load()
	return c == nil || u == nil || c.host != u.Host
}

// Claim reports whether the caller's send is the first to c's host: it
// goes at once, and the caller calls Open when its answer (or its error)
// is read.
func (c *Contact) Claim() bool { return c.claimed.CompareAndSwap(false, true) }

// Open lets the sends waiting for c go: the first send to its host was
// answered, or failed.
func (c *Contact) Open() {
	if c.heard.CompareAndSwap(false, true) {
		close(c.done)
	}
}

// Wait waits for the answer to the first send to c's host, at most
// FirstContactWait (then the host is taken as heard from), or until ctx
// ends, whose error it returns.
func (c *Contact) Wait(ctx context.Context) error {
	timer := time.NewTimer(FirstContactWait)
	defer timer.Stop()
	select {
	case <-c.done:
		return nil
	case <-timer.C:
		c.Open()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
