package retryhttp_test

import (
	"context"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Distinct top-level functions, told apart by name in resolved settings.
func shouldRetryA(retryhttp.Attempt) bool    { return true }
func shouldRetryB(retryhttp.Attempt) bool    { return false }
func delayA(retryhttp.Attempt) time.Duration { return time.Millisecond }
func delayB(retryhttp.Attempt) time.Duration { return 2 * time.Millisecond }

// Compile-time check: an Option is a plain func(*Transport), as in the
// reference package, so slices of either type work with New.
var _ func(*retryhttp.Transport) = retryhttp.WithMaxRetries(1)

// funcName returns the unqualified name of a top-level function, or "nil".
func funcName(f any) string {
	v := reflect.ValueOf(f)
	if v.IsNil() {
		return "nil"
	}
	name := runtime.FuncForPC(v.Pointer()).Name()
	return name[strings.LastIndex(name, ".")+1:]
}

// view is ResolvedSettings with functions replaced by their names, so that
// resolutions can be compared with assert.Equal.
type view struct {
	MaxRetries           int
	ShouldRetry          string
	Delay                string
	PreventRetryWithBody bool
	AttemptTimeout       time.Duration
	MaxDelay             time.Duration
	BodyBufferLimit      int64
}

func resolve(tr *retryhttp.Transport, ctx context.Context) view {
	s := settings(tr, ctx)
	return view{
		MaxRetries:           s.MaxRetries,
		ShouldRetry:          funcName(s.ShouldRetry),
		Delay:                funcName(s.Delay),
		PreventRetryWithBody: s.PreventRetryWithBody,
		AttemptTimeout:       s.AttemptTimeout,
		MaxDelay:             s.MaxDelay,
		BodyBufferLimit:      s.BodyBufferLimit,
	}
}

// defaults is what a Transport with no options runs with.
var defaults = view{
	MaxRetries:      retryhttp.DefaultMaxRetries,
	ShouldRetry:     "DefaultShouldRetryFn",
	Delay:           "DefaultDelayFn",
	AttemptTimeout:  0,
	MaxDelay:        60 * time.Second,
	BodyBufferLimit: 1 << 20,
}

// but returns the defaults changed by f.
func but(f func(v *view)) view {
	v := defaults
	f(&v)
	return v
}

func TestDefaultMaxRetries(t *testing.T) {
	assert.Equal(t, 3, retryhttp.DefaultMaxRetries)
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name string
		give []retryhttp.Option
		want view
	}{
		{"none", nil, defaults},
		{"nil option", []retryhttp.Option{nil}, defaults},
		{"nil among options", []retryhttp.Option{nil, retryhttp.WithMaxRetries(1), nil}, but(func(v *view) { v.MaxRetries = 1 })},

		{"max retries", []retryhttp.Option{retryhttp.WithMaxRetries(5)}, but(func(v *view) { v.MaxRetries = 5 })},
		{"max retries 0", []retryhttp.Option{retryhttp.WithMaxRetries(0)}, but(func(v *view) { v.MaxRetries = 0 })},
		{"max retries negative is 0", []retryhttp.Option{retryhttp.WithMaxRetries(-1)}, but(func(v *view) { v.MaxRetries = 0 })},
		{"max retries last wins", []retryhttp.Option{retryhttp.WithMaxRetries(0), retryhttp.WithMaxRetries(7)}, but(func(v *view) { v.MaxRetries = 7 })},

		{"should retry", []retryhttp.Option{retryhttp.WithShouldRetryFn(shouldRetryA)}, but(func(v *view) { v.ShouldRetry = "shouldRetryA" })},
		{"should retry nil is default", []retryhttp.Option{retryhttp.WithShouldRetryFn(nil)}, defaults},
		{"should retry then nil", []retryhttp.Option{retryhttp.WithShouldRetryFn(shouldRetryA), retryhttp.WithShouldRetryFn(nil)}, defaults},
		{"should retry last wins", []retryhttp.Option{retryhttp.WithShouldRetryFn(shouldRetryA), retryhttp.WithShouldRetryFn(shouldRetryB)}, but(func(v *view) { v.ShouldRetry = "shouldRetryB" })},

		{"delay", []retryhttp.Option{retryhttp.WithDelayFn(delayA)}, but(func(v *view) { v.Delay = "delayA" })},
		{"delay nil is default", []retryhttp.Option{retryhttp.WithDelayFn(nil)}, defaults},
		{"delay then nil", []retryhttp.Option{retryhttp.WithDelayFn(delayA), retryhttp.WithDelayFn(nil)}, defaults},

		{"prevent retry with body", []retryhttp.Option{retryhttp.WithPreventRetryWithBody(true)}, but(func(v *view) { v.PreventRetryWithBody = true })},
		{"prevent retry with body off", []retryhttp.Option{retryhttp.WithPreventRetryWithBody(true), retryhttp.WithPreventRetryWithBody(false)}, defaults},

		{"attempt timeout", []retryhttp.Option{retryhttp.WithAttemptTimeout(2 * time.Second)}, but(func(v *view) { v.AttemptTimeout = 2 * time.Second })},
		{"attempt timeout 0", []retryhttp.Option{retryhttp.WithAttemptTimeout(0)}, defaults},
		{"attempt timeout negative is none", []retryhttp.Option{retryhttp.WithAttemptTimeout(-time.Second)}, defaults},

		{"max delay", []retryhttp.Option{retryhttp.WithMaxDelay(5 * time.Second)}, but(func(v *view) { v.MaxDelay = 5 * time.Second })},
		{"max delay above default", []retryhttp.Option{retryhttp.WithMaxDelay(time.Hour)}, but(func(v *view) { v.MaxDelay = time.Hour })},
		{"max delay 0 is default", []retryhttp.Option{retryhttp.WithMaxDelay(0)}, defaults},
		{"max delay negative is default", []retryhttp.Option{retryhttp.WithMaxDelay(-time.Second)}, defaults},

		{"body buffer limit", []retryhttp.Option{retryhttp.WithBodyBufferLimit(10)}, but(func(v *view) { v.BodyBufferLimit = 10 })},
		{"body buffer limit 0 means never", []retryhttp.Option{retryhttp.WithBodyBufferLimit(0)}, but(func(v *view) { v.BodyBufferLimit = 0 })},
		{"body buffer limit negative is 0", []retryhttp.Option{retryhttp.WithBodyBufferLimit(-5)}, but(func(v *view) { v.BodyBufferLimit = 0 })},

		{"all together", []retryhttp.Option{
			retryhttp.WithMaxRetries(9),
			retryhttp.WithShouldRetryFn(shouldRetryB),
			retryhttp.WithDelayFn(delayB),
			retryhttp.WithPreventRetryWithBody(true),
			retryhttp.WithAttemptTimeout(time.Second),
			retryhttp.WithMaxDelay(3 * time.Second),
			retryhttp.WithBodyBufferLimit(4096),
			retryhttp.WithTransport(http.DefaultTransport),
		}, view{
			MaxRetries:           9,
			ShouldRetry:          "shouldRetryB",
			Delay:                "delayB",
			PreventRetryWithBody: true,
			AttemptTimeout:       time.Second,
			MaxDelay:             3 * time.Second,
			BodyBufferLimit:      4096,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := retryhttp.New(tt.give...)
			assert.Equal(t, tt.want, resolve(tr, context.Background()))
		})
	}
}

func TestZeroValueSettings(t *testing.T) {
	assert.Equal(t, defaults, resolve(&retryhttp.Transport{}, context.Background()))
}

func TestContextOverrides(t *testing.T) {
	bg := context.Background()
	// The transport's own settings, which the overrides replace.
	base := []retryhttp.Option{
		retryhttp.WithMaxRetries(2),
		retryhttp.WithShouldRetryFn(shouldRetryB),
		retryhttp.WithDelayFn(delayB),
		retryhttp.WithPreventRetryWithBody(true),
		retryhttp.WithAttemptTimeout(5 * time.Second),
		retryhttp.WithMaxDelay(7 * time.Second),
		retryhttp.WithBodyBufferLimit(100),
	}
	baseView := view{
		MaxRetries:           2,
		ShouldRetry:          "shouldRetryB",
		Delay:                "delayB",
		PreventRetryWithBody: true,
		AttemptTimeout:       5 * time.Second,
		MaxDelay:             7 * time.Second,
		BodyBufferLimit:      100,
	}
	on := func(f func(v *view)) view {
		v := baseView
		f(&v)
		return v
	}
	withCancel := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		return ctx
	}
	type ctxKey struct{}

	tests := []struct {
		name string
		give context.Context
		want view
	}{
		{"none", bg, baseView},
		{"max retries", retryhttp.SetMaxRetries(bg, 6), on(func(v *view) { v.MaxRetries = 6 })},
		{"max retries 0", retryhttp.SetMaxRetries(bg, 0), on(func(v *view) { v.MaxRetries = 0 })},
		{"max retries negative is 0", retryhttp.SetMaxRetries(bg, -4), on(func(v *view) { v.MaxRetries = 0 })},
		{"later max retries wins", retryhttp.SetMaxRetries(retryhttp.SetMaxRetries(bg, 1), 4), on(func(v *view) { v.MaxRetries = 4 })},
		{"max retries then attempt timeout keeps both",
			retryhttp.SetAttemptTimeout(retryhttp.SetMaxRetries(bg, 1), time.Second),
			on(func(v *view) { v.MaxRetries = 1; v.AttemptTimeout = time.Second })},
		{"attempt timeout then max retries keeps both",
			retryhttp.SetMaxRetries(retryhttp.SetAttemptTimeout(bg, time.Second), 1),
			on(func(v *view) { v.MaxRetries = 1; v.AttemptTimeout = time.Second })},
		{"should retry", retryhttp.SetShouldRetryFn(bg, shouldRetryA), on(func(v *view) { v.ShouldRetry = "shouldRetryA" })},
		{"should retry default", retryhttp.SetShouldRetryFn(bg, retryhttp.DefaultShouldRetryFn), on(func(v *view) { v.ShouldRetry = "DefaultShouldRetryFn" })},
		{"should retry nil is no override", retryhttp.SetShouldRetryFn(bg, nil), baseView},
		{"should retry nil removes override", retryhttp.SetShouldRetryFn(retryhttp.SetShouldRetryFn(bg, shouldRetryA), nil), baseView},
		{"delay", retryhttp.SetDelayFn(bg, delayA), on(func(v *view) { v.Delay = "delayA" })},
		{"delay nil removes override", retryhttp.SetDelayFn(retryhttp.SetDelayFn(bg, delayA), nil), baseView},
		{"prevent false overrides true", retryhttp.SetPreventRetryWithBody(bg, false), on(func(v *view) { v.PreventRetryWithBody = false })},
		{"prevent true", retryhttp.SetPreventRetryWithBody(bg, true), baseView},
		{"attempt timeout", retryhttp.SetAttemptTimeout(bg, time.Second), on(func(v *view) { v.AttemptTimeout = time.Second })},
		{"attempt timeout 0 removes it", retryhttp.SetAttemptTimeout(bg, 0), on(func(v *view) { v.AttemptTimeout = 0 })},
		{"attempt timeout negative is none", retryhttp.SetAttemptTimeout(bg, -time.Second), on(func(v *view) { v.AttemptTimeout = 0 })},
		{"all", retryhttp.SetAttemptTimeout(retryhttp.SetPreventRetryWithBody(retryhttp.SetDelayFn(
			retryhttp.SetShouldRetryFn(retryhttp.SetMaxRetries(bg, 8), shouldRetryA), delayA), false), 3*time.Second),
			on(func(v *view) {
				v.MaxRetries = 8
				v.ShouldRetry = "shouldRetryA"
				v.Delay = "delayA"
				v.PreventRetryWithBody = false
				v.AttemptTimeout = 3 * time.Second
			})},
		{"through derived contexts",
			context.WithValue(withCancel(retryhttp.SetMaxRetries(context.WithValue(bg, ctxKey{}, 1), 6)), ctxKey{}, 2),
			on(func(v *view) { v.MaxRetries = 6 })},
		{"layered through derived contexts",
			retryhttp.SetDelayFn(withCancel(retryhttp.SetMaxRetries(bg, 6)), delayA),
			on(func(v *view) { v.MaxRetries = 6; v.Delay = "delayA" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := retryhttp.New(base...)
			assert.Equal(t, tt.want, resolve(tr, tt.give))
		})
	}
}

// TestContextOverridesOnDefaults checks overrides over a transport with no
// options: removing a function override falls back to the default.
func TestContextOverridesOnDefaults(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		name string
		give context.Context
		want view
	}{
		{"should retry", retryhttp.SetShouldRetryFn(bg, shouldRetryA), but(func(v *view) { v.ShouldRetry = "shouldRetryA" })},
		{"should retry removed", retryhttp.SetShouldRetryFn(retryhttp.SetShouldRetryFn(bg, shouldRetryA), nil), defaults},
		{"delay removed", retryhttp.SetDelayFn(retryhttp.SetDelayFn(bg, delayA), nil), defaults},
		{"max retries", retryhttp.SetMaxRetries(bg, 0), but(func(v *view) { v.MaxRetries = 0 })},
		{"prevent", retryhttp.SetPreventRetryWithBody(bg, true), but(func(v *view) { v.PreventRetryWithBody = true })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, resolve(retryhttp.New(), tt.give))
		})
	}
}

// TestContextOverridesDoNotChangeParent checks that layering an override
// returns a new context and leaves the parent's overrides as they were.
func TestContextOverridesDoNotChangeParent(t *testing.T) {
	tr := retryhttp.New()
	parent := retryhttp.SetShouldRetryFn(retryhttp.SetMaxRetries(context.Background(), 1), shouldRetryA)
	child := retryhttp.SetAttemptTimeout(retryhttp.SetShouldRetryFn(retryhttp.SetMaxRetries(parent, 5), nil), time.Second)

	assert.Equal(t, but(func(v *view) { v.MaxRetries = 1; v.ShouldRetry = "shouldRetryA" }), resolve(tr, parent))
	assert.Equal(t, but(func(v *view) { v.MaxRetries = 5; v.AttemptTimeout = time.Second }), resolve(tr, child))
}

// TestContextOverridesSameForAllTransports checks that an override belongs
// to the request, not to one transport.
func TestContextOverridesSameForAllTransports(t *testing.T) {
	ctx := retryhttp.SetMaxRetries(context.Background(), 9)
	assert.Equal(t, 9, settings(retryhttp.New(retryhttp.WithMaxRetries(1)), ctx).MaxRetries)
	assert.Equal(t, 9, settings(&retryhttp.Transport{}, ctx).MaxRetries)
}

func TestWithTransport(t *testing.T) {
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	assert.Same(t, base, retryhttp.BaseTransport(retryhttp.New(retryhttp.WithTransport(base))))

	// The last one wins; nil means the default.
	tr := retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithTransport(nil))
	_, ok := retryhttp.BaseTransport(tr).(*http.Transport)
	assert.True(t, ok)
	assert.NotSame(t, base, retryhttp.BaseTransport(tr))
}

// TestDefaultBaseTransport checks that the default base transport is a pooled
// *http.Transport made once and shared by every Transport made without
// WithTransport (the zero value included), and not http.DefaultTransport.
func TestDefaultBaseTransport(t *testing.T) {
	a, b := retryhttp.New(), &retryhttp.Transport{}
	defer a.CloseIdleConnections()

	ba, ok := retryhttp.BaseTransport(a).(*http.Transport)
	require.True(t, ok)
	assert.NotSame(t, http.DefaultTransport, ba)
	assert.Same(t, ba, retryhttp.BaseTransport(b))
	assert.Same(t, ba, retryhttp.BaseTransport(retryhttp.New(retryhttp.WithTransport(nil))))
	// Pooled, as go-cleanhttp's DefaultPooledTransport.
	want := cleanhttp.DefaultPooledTransport()
	assert.False(t, ba.DisableKeepAlives)
	assert.Equal(t, want.MaxIdleConnsPerHost, ba.MaxIdleConnsPerHost)
	assert.Equal(t, want.IdleConnTimeout, ba.IdleConnTimeout)
	assert.NotNil(t, ba.Proxy) // http.ProxyFromEnvironment

	// Made once, even when first asked for by many goroutines at once.
	c := retryhttp.New()
	defer c.CloseIdleConnections()
	got := make([]http.RoundTripper, 16)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = retryhttp.BaseTransport(c)
		}()
	}
	wg.Wait()
	for _, rt := range got {
		assert.Same(t, got[0], rt)
	}
	assert.Same(t, got[0], retryhttp.BaseTransport(c))
}
