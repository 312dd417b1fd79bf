package teebody

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sentinels a test Body wraps, as package retryhttp's do.
var (
	errNotReplayable = errors.New("not replayable")
	errBuffering     = errors.New("buffering")
	testErrors       = Errors{Overflow: fmt.Errorf("%w: over the limit", errNotReplayable), Buffering: errBuffering}
)

// countClose counts the Close calls of a body.
type countClose struct {
	io.Reader
	mu     sync.Mutex
	closes int
}

func (c *countClose) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closes++
	return nil
}

func (c *countClose) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closes
}

func TestTeeConcurrentReadersEachGetTheWholeBody(t *testing.T) {
	// Readers that run at once (an attempt net/http still reads while the
	// next one, or a hedge, starts) each get every byte, in order: one at
	// a time reads the caller's body, the others follow from the copy.
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	src := &countClose{Reader: iotest.OneByteReader(bytes.NewReader(data))}
	tee := New(src, int64(len(data)), testErrors)
	const readers = 4
	got := make([][]byte, readers)
	var wg sync.WaitGroup
	for i := range got {
		r := tee.Reader()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			got[i], _ = io.ReadAll(iotest.HalfReader(r))
		}()
	}
	wg.Wait()
	for i := range got {
		assert.Equal(t, data, got[i], "reader %d", i)
	}
	assert.True(t, tee.Replayable())
	assert.Equal(t, 1, src.count(), "closed once, at its end")
	tee.Finish()
	assert.Equal(t, 1, src.count())
}

func TestTeeOverflowDropsTheCopy(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 1000)
	src := &countClose{Reader: bytes.NewReader(data)}
	tee := New(src, 100, testErrors)
	r := tee.Reader()
	buf := make([]byte, 64)
	_, err := io.ReadFull(r, buf)
	require.NoError(t, err)
	assert.True(t, tee.Replayable(), "64 bytes fit")

	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Len(t, rest, len(data)-64, "the first attempt gets the whole body")
	assert.False(t, tee.Replayable())
	assert.Nil(t, tee.buf, "the copy is dropped: memory stays bounded")
	_, err = tee.GetBody()
	assert.ErrorIs(t, err, errNotReplayable)
	late := tee.Reader()
	_, err = late.Read(buf)
	assert.ErrorIs(t, err, errNotReplayable, "a reader behind cannot be served")
	require.NoError(t, late.Close())
	require.NoError(t, r.Close())
	assert.Equal(t, 1, src.count())
}

func TestTeeClosesCallerBodyWhenLastReaderCloses(t *testing.T) {
	// A dial error: the attempt closes its reader without reading. The
	// caller's body stays open for a retry until the request finishes.
	src := &countClose{Reader: bytes.NewReader([]byte("payload"))}
	tee := New(src, 1<<20, testErrors)
	first := tee.Reader()
	require.NoError(t, first.Close())
	assert.Zero(t, src.count(), "kept for the retry")
	assert.True(t, tee.Started() && tee.Replayable())

	second := tee.Reader()
	tee.Finish() // the retry is the last attempt, still reading
	assert.Zero(t, src.count())
	got, err := io.ReadAll(second)
	require.NoError(t, err)
	assert.Equal(t, "payload", string(got))
	require.NoError(t, second.Close())
	assert.Equal(t, 1, src.count())

	_, err = second.Read(make([]byte, 1))
	assert.ErrorIs(t, err, ErrReadAfterClose)
}

func TestTeeFinishClosesUnreadBody(t *testing.T) {
	src := &countClose{Reader: bytes.NewReader([]byte("never read"))}
	tee := New(src, 1<<20, testErrors)
	require.NoError(t, tee.Reader().Close())
	tee.Finish()
	assert.Equal(t, 1, src.count())
}

func TestTeeSourceErrorIserrBuffering(t *testing.T) {
	errDisk := errors.New("disk on fire")
	src := &countClose{Reader: io.MultiReader(bytes.NewReader([]byte("part")), iotest.ErrReader(errDisk))}
	tee := New(src, 1<<20, testErrors)
	r := tee.Reader()
	_, err := io.ReadAll(r)
	assert.ErrorIs(t, err, errBuffering)
	assert.ErrorIs(t, err, errDisk)
	assert.False(t, tee.Replayable())
	require.NoError(t, r.Close())
	tee.Finish()
	assert.Equal(t, 1, src.count())
}

func TestTeeEmptyBodyReplays(t *testing.T) {
	src := &countClose{Reader: bytes.NewReader(nil)}
	tee := New(src, 1, testErrors)
	r := tee.Reader()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.True(t, tee.Replayable())
	r2, err := tee.GetBody()
	require.NoError(t, err)
	got, err = io.ReadAll(r2)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestTeeCopyNeverOutgrowsLimit(t *testing.T) {
	const limit = 3000
	data := bytes.Repeat([]byte("y"), limit)
	tee := New(&countClose{Reader: iotest.HalfReader(bytes.NewReader(data))}, limit, testErrors)
	r := tee.Reader()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	assert.Equal(t, data, tee.buf, "a body of exactly the limit is kept")
	assert.LessOrEqual(t, cap(tee.buf), limit, "the copy's memory stays within the limit")
}
