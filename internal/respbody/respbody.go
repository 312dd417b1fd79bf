// Package respbody lets go of the body of a response that nobody reads
// now, so that its connection can go back to the pool: a response the
// caller will never see is drained and closed (Discard); one that a parked
// retry keeps, to return it if the retry gives up, is read into memory
// (Keep). Both are bounded in bytes and in time: a body too long or too
// slow costs its connection instead. Package retryhttp's retry loop, hedges
// and parking are its users.
package respbody

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// MaxDrain bounds how much of a discarded response body is read so that its
// connection can be reused. A longer body costs the connection instead.
const MaxDrain = 64 << 10

// MaxDrainTime bounds how long draining a discarded response body may take
// when no attempt timeout does. Draining only saves setting up a new
// connection, which takes a few round trips; a body that stalls for longer
// costs the connection instead.
const MaxDrainTime = 500 * time.Millisecond

// MaxKept bounds the body of a response that a parked retry keeps while it
// waits: the response is returned as it is if the retry gives up, and
// reading its body lets its connection go back to the pool meanwhile. A
// longer body (or one that fails to read) is not kept: the retry is
// refused at once, as without parking, with the response untouched but for
// the bytes read, which are read again first.
const MaxKept = 4 << 10

// Discard drains a response nobody will read, up to MaxDrain bytes and for
// a bounded time, and closes it. rearm, if not nil, bounds the drain in
// place of Discard's own timer: called with MaxDrainTime, it must see that
// a read of the body ends within that time (package retryhttp passes the
// body's attempt timer, which cancels the attempt when it fires). A nil res
// or body is left alone.
func Discard(res *http.Response, rearm func(time.Duration)) {
	if res == nil || res.Body == nil {
		return
	}
	if res.Body == http.NoBody || res.ContentLength > MaxDrain {
		// Nothing to read, or too much: no drain, so no timer for it.
		res.Body.Close()
		return
	}
	var once sync.Once
	closeOnce := func() { once.Do(func() { res.Body.Close() }) }
	if rearm != nil {
		rearm(MaxDrainTime) // a body that trickles is cut by the attempt's context
	} else {
		// A body that trickles or stalls is cut by closing it, which
		// unblocks a read in progress.
		timer := time.AfterFunc(MaxDrainTime, closeOnce)
		defer timer.Stop()
	}
	// One byte more than the bound, so that a chunked body of exactly
	// MaxDrain bytes is read to its end and its connection reused. A
	// ContentLength of -1, unknown, is read so too.
	_, _ = io.CopyN(io.Discard, res.Body, MaxDrain+1)
	closeOnce()
}

// Keep reads res's body into memory, up to MaxKept, and closes it, so that
// res can wait without holding a connection. It reports false, leaving res
// readable as it was, if the body is longer or fails to read; a body that
// stalls for MaxDrainTime is cut there, as a discarded one would be. A nil
// res is kept.
func Keep(res *http.Response) bool {
	switch {
	case res == nil || res.Body == nil || res.Body == http.NoBody:
		return true
	case res.ContentLength > MaxKept:
		return false
	}
	body := res.Body
	// A body that stalls is cut, as a discarded one is (Discard): closing
	// it unblocks the read.
	cut := time.AfterFunc(MaxDrainTime, func() { body.Close() })
	buf, err := io.ReadAll(io.LimitReader(body, MaxKept+1))
	cut.Stop()
	if err != nil || len(buf) > MaxKept {
		res.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf), body), body: body}
		return false
	}
	body.Close()
	res.Body = io.NopCloser(bytes.NewReader(buf))
	return true
}

// prefixedBody is a body whose first bytes were read already.
type prefixedBody struct {
	io.Reader
	body io.ReadCloser
}

func (p *prefixedBody) Close() error { return p.body.Close() }
