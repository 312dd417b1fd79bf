// Package teebody is the body of a request that may be retried but cannot be
// read again (it has no GetBody): the caller's body read once, as fast as the
// attempts read it, with a copy kept up to a limit for the attempts that
// follow. Package retryhttp's replay (body.go) is its only user.
package teebody

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Body is the body of a request without GetBody that may be retried: the
// caller's body, read once, as fast as the attempts read
// it, with a copy of what was read kept up to a limit. The first attempt
// streams the body as it comes, exactly as bare net/http would (a
// full-duplex body whose writer waits for the response works); a later
// attempt reads the copy, then goes on reading the caller's body where
// the copy ends. As in grpc-go, a request stops being retryable once its
// copy overflows the limit (or the caller's body fails): then the copy is
// dropped, and no attempt is added.
//
// Each attempt reads through a Reader of its own. Several may read at
// once: net/http may go on reading (and then close) an attempt's body after
// its RoundTrip returned, while the next attempt reads, and net/http's own
// replays read through GetBody. Only one
// of them reads the caller's body at a time; the others wait for that read
// and take its bytes from the copy. The caller's body is closed once it is
// read to its end, or once no reader is open and no attempt will follow
// (Finish). It is safe for concurrent use.
type Body struct {
	src   io.ReadCloser
	limit int64
	errs  Errors

	mu      sync.Mutex
	turn    sync.Cond // on mu: a read of src ended, or a reader closed
	buf     []byte    // every byte src gave, while they fit the limit
	n       int64     // how many bytes src gave
	over    bool      // src gave more than limit: buf is dropped
	err     error     // src's error: io.EOF at its end
	reading bool      // a read of src is in progress
	open    int       // readers not closed
	made    bool      // a reader was made: the first attempt is built
	done    bool      // no reader will be added (finish)
	closed  bool      // src is closed, or being closed
}

// Errors are the errors a Body returns, chosen by its user so that they
// wrap the user's own sentinels.
type Errors struct {
	// Overflow is the error of a reader that needed bytes of the body that
	// the copy no longer holds: it overflowed while an earlier reader was
	// still reading the caller's body. GetBody returns it too.
	Overflow error

	// Buffering wraps (with %w) the error of a failed read of the caller's
	// body.
	Buffering error
}

// ErrReadAfterClose is the error of a read of a Reader after its Close.
var ErrReadAfterClose = errors.New("retryhttp: read of a closed request body")

// New returns the Body that reads src, keeping a copy of up to limit bytes,
// and fails with errs.
func New(src io.ReadCloser, limit int64, errs Errors) *Body {
	t := &Body{src: src, limit: limit, errs: errs}
	t.turn.L = &t.mu
	return t
}

// Reader returns a new reader of the whole body, for one attempt.
func (t *Body) Reader() *Reader {
	t.mu.Lock()
	t.open++
	t.made = true
	t.mu.Unlock()
	return &Reader{t: t}
}

// Started reports whether a reader was made: the first attempt is built.
func (t *Body) Started() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.made
}

// Replayable reports whether another attempt could send the whole body:
// every byte read so far is still held, and the caller's body did not fail.
func (t *Body) Replayable() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.over && (t.err == nil || t.err == io.EOF)
}

// GetBody is the GetBody of every attempt's request: a new reader of the
// whole body, for a base transport that replays the request by itself, or
// an error once the copy no longer holds the whole body read so far.
func (t *Body) GetBody() (io.ReadCloser, error) {
	if !t.Replayable() {
		return nil, t.errs.Overflow
	}
	return t.Reader(), nil
}

// Finish says that no attempt will follow: the caller's body is closed
// now, or when the last reader still open closes.
func (t *Body) Finish() {
	t.mu.Lock()
	t.done = true
	closeSrc := t.takeClose()
	t.mu.Unlock()
	if closeSrc {
		t.src.Close()
	}
}

// takeClose reports whether the caller's body must be closed now, and
// marks it closed if so: no reader is open and none will be added. It
// requires that t.mu is held.
func (t *Body) takeClose() bool {
	if t.closed || t.open > 0 || !t.done {
		return false
	}
	t.closed = true
	return true
}

// keep records p, the bytes of one read of src, and its error. It
// requires that t.mu is held.
func (t *Body) keep(p []byte, err error) {
	t.n += int64(len(p))
	switch {
	case t.over:
	case t.n > t.limit:
		t.over, t.buf = true, nil
	default:
		t.grow(len(p))
		t.buf = append(t.buf, p...)
	}
	switch {
	case err == io.EOF:
		t.err = err
	case err != nil:
		t.err = fmt.Errorf("%w: %w", t.errs.Buffering, err)
	}
}

// grow makes room in buf for n more bytes, which fit the limit: doubling
// its capacity as append would, but never past the limit, so that the copy
// of a body of exactly the limit costs the limit, not twice it. It requires
// that t.mu is held.
func (t *Body) grow(n int) {
	need := len(t.buf) + n
	if need <= cap(t.buf) {
		return
	}
	c := int64(max(2*cap(t.buf), need, 512))
	buf := make([]byte, len(t.buf), min(c, t.limit))
	copy(buf, t.buf)
	t.buf = buf
}

// Reader is the body of one attempt: the copy, then the caller's body.
type Reader struct {
	t      *Body
	off    int64 // bytes of the body this reader returned
	closed bool  // guarded by t.mu
}

// Read returns the next bytes of the body: from the copy while this reader
// is behind, else from the caller's body, once no other reader is reading
// it.
func (r *Reader) Read(p []byte) (int, error) {
	t := r.t
	t.mu.Lock()
	for {
		switch {
		case r.closed:
			t.mu.Unlock()
			return 0, ErrReadAfterClose
		case r.off < t.n && t.over:
			t.mu.Unlock()
			return 0, t.errs.Overflow
		case r.off < t.n:
			n := copy(p, t.buf[r.off:])
			r.off += int64(n)
			t.mu.Unlock()
			return n, nil
		case t.err != nil:
			err := t.err
			t.mu.Unlock()
			return 0, err
		case !t.reading:
			return r.readSrc(p) // unlocks t.mu
		}
		t.turn.Wait()
	}
}

// readSrc reads the caller's body into p, keeping a copy. It requires that
// t.mu is held, and unlocks it.
func (r *Reader) readSrc(p []byte) (int, error) {
	t := r.t
	t.reading = true
	t.mu.Unlock()
	n, err := t.src.Read(p)
	t.mu.Lock()
	t.reading = false
	t.keep(p[:n], err)
	r.off = t.n
	err = t.err // the caller's error, wrapped
	closeSrc := err == io.EOF && !t.closed
	if closeSrc {
		t.closed = true // read to its end: the copy is all a retry needs
	}
	t.turn.Broadcast()
	t.mu.Unlock()
	if closeSrc {
		t.src.Close()
	}
	if n > 0 && err == io.EOF {
		return n, nil // EOF on the next read, as net/http expects of a body
	}
	return n, err
}

// Close ends this attempt's reading. The caller's body is closed when no
// attempt reads it any longer and none will follow.
func (r *Reader) Close() error {
	t := r.t
	t.mu.Lock()
	if r.closed {
		t.mu.Unlock()
		return nil
	}
	r.closed = true
	t.open--
	closeSrc := t.takeClose()
	t.turn.Broadcast() // a Read of this reader waiting for its turn ends
	t.mu.Unlock()
	if closeSrc {
		return t.src.Close()
	}
	return nil
}
