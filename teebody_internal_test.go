package retryhttp

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	tee := newTeeBody(src, int64(len(data)))
	const readers = 4
	got := make([][]byte, readers)
	var wg sync.WaitGroup
	for i := range got {
		r := tee.reader()
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
	assert.True(t, tee.replayable())
	assert.Equal(t, 1, src.count(), "closed once, at its end")
	tee.finish()
	assert.Equal(t, 1, src.count())
}

func TestTeeOverflowDropsTheCopy(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 1000)
	src := &countClose{Reader: bytes.NewReader(data)}
	tee := newTeeBody(src, 100)
	r := tee.reader()
	buf := make([]byte, 64)
	_, err := io.ReadFull(r, buf)
	require.NoError(t, err)
	assert.True(t, tee.replayable(), "64 bytes fit")

	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Len(t, rest, len(data)-64, "the first attempt gets the whole body")
	assert.False(t, tee.replayable())
	assert.Nil(t, tee.buf, "the copy is dropped: memory stays bounded")
	_, err = tee.getBody()
	assert.ErrorIs(t, err, ErrBodyNotReplayable)
	late := tee.reader()
	_, err = late.Read(buf)
	assert.ErrorIs(t, err, ErrBodyNotReplayable, "a reader behind cannot be served")
	require.NoError(t, late.Close())
	require.NoError(t, r.Close())
	assert.Equal(t, 1, src.count())
}

func TestTeeClosesCallerBodyWhenLastReaderCloses(t *testing.T) {
	// A dial error: the attempt closes its reader without reading. The
	// caller's body stays open for a retry until the request finishes.
	src := &countClose{Reader: bytes.NewReader([]byte("payload"))}
	tee := newTeeBody(src, 1<<20)
	first := tee.reader()
	require.NoError(t, first.Close())
	assert.Zero(t, src.count(), "kept for the retry")
	assert.True(t, tee.started() && tee.replayable())

	second := tee.reader()
	tee.finish() // the retry is the last attempt, still reading
	assert.Zero(t, src.count())
	got, err := io.ReadAll(second)
	require.NoError(t, err)
	assert.Equal(t, "payload", string(got))
	require.NoError(t, second.Close())
	assert.Equal(t, 1, src.count())

	_, err = second.Read(make([]byte, 1))
	assert.ErrorIs(t, err, errReadAfterClose)
}

func TestTeeFinishClosesUnreadBody(t *testing.T) {
	src := &countClose{Reader: bytes.NewReader([]byte("never read"))}
	tee := newTeeBody(src, 1<<20)
	require.NoError(t, tee.reader().Close())
	tee.finish()
	assert.Equal(t, 1, src.count())
}

func TestTeeSourceErrorIsErrBufferingBody(t *testing.T) {
	errDisk := errors.New("disk on fire")
	src := &countClose{Reader: io.MultiReader(bytes.NewReader([]byte("part")), iotest.ErrReader(errDisk))}
	tee := newTeeBody(src, 1<<20)
	r := tee.reader()
	_, err := io.ReadAll(r)
	assert.ErrorIs(t, err, ErrBufferingBody)
	assert.ErrorIs(t, err, errDisk)
	assert.False(t, tee.replayable())
	require.NoError(t, r.Close())
	tee.finish()
	assert.Equal(t, 1, src.count())
}

func TestTeeEmptyBodyReplays(t *testing.T) {
	src := &countClose{Reader: bytes.NewReader(nil)}
	tee := newTeeBody(src, 1)
	r := tee.reader()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.True(t, tee.replayable())
	r2, err := tee.getBody()
	require.NoError(t, err)
	got, err = io.ReadAll(r2)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestTeeCopyNeverOutgrowsLimit(t *testing.T) {
	const limit = 3000
	data := bytes.Repeat([]byte("y"), limit)
	tee := newTeeBody(&countClose{Reader: iotest.HalfReader(bytes.NewReader(data))}, limit)
	r := tee.reader()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	assert.Equal(t, data, tee.buf, "a body of exactly the limit is kept")
	assert.LessOrEqual(t, cap(tee.buf), limit, "the copy's memory stays within the limit")
}
