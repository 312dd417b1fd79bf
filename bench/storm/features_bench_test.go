package storm

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The happy GET (200 at once, in memory) with one of retryhttp's optional
// features on, against the bare transport and the peers that have an
// equivalent: a circuit breaker, OpenTelemetry metrics, hedging whose hedge
// never fires. go-retryablehttp has none of the three; failsafehttp has a
// breaker (one circuit for the whole RoundTripper, not one per destination
// host) and hedging, and no metrics of its own.

// feature is a row of BenchmarkHappyPathWith.
type feature struct {
	name string
	// peers are the columns that have the feature, the bare GET first.
	// wrap may return a func to call when the row is done.
	peers []featurePeer
}

// featurePeer is a column of a feature row.
type featurePeer struct {
	name string
	wrap func(base http.RoundTripper) (http.RoundTripper, func())
}

// hedgeDelay is the hedging delay of the hedge rows: far longer than the
// in-memory answer takes, so that the hedge never fires.
const hedgeDelay = time.Minute

// bareColumn is the bare transport: the first column of every feature row.
var bareColumn = featurePeer{"bare", func(base http.RoundTripper) (http.RoundTripper, func()) { return base, func() {} }}

// ours returns a column that wraps base in retryhttp with zero waits, as
// the "retryhttp" column of peers() does, and opts.
func ours(opts ...retryhttp.Option) func(http.RoundTripper) (http.RoundTripper, func()) {
	return func(base http.RoundTripper) (http.RoundTripper, func()) {
		all := append([]retryhttp.Option{retryhttp.WithTransport(base), retryhttp.WithDelayFn(noWait)}, opts...)
		return retryhttp.New(all...), func() {}
	}
}

func features() []feature {
	return []feature{
		{"breaker", []featurePeer{
			bareColumn,
			{"retryhttp", ours(retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{}))},
			{"failsafehttp", func(base http.RoundTripper) (http.RoundTripper, func()) {
				retry := failsafehttp.NewRetryPolicyBuilder().WithDelay(0).Build()
				return failsafehttp.NewRoundTripper(base, retry, circuitbreaker.NewWithDefaults[*http.Response]()), func() {}
			}},
		}},
		{"metrics", []featurePeer{
			bareColumn,
			{"retryhttp", func(base http.RoundTripper) (http.RoundTripper, func()) {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				metrics, err := otelretryhttp.New(mp)
				if err != nil {
					panic(err)
				}
				rt, _ := ours(metrics)(base)
				return rt, func() { _ = mp.Shutdown(context.Background()) }
			}},
		}},
		{"hedge", []featurePeer{
			bareColumn,
			{"retryhttp", ours(retryhttp.WithHedging(hedgeDelay, 1))},
			{"failsafehttp", func(base http.RoundTripper) (http.RoundTripper, func()) {
				retry := failsafehttp.NewRetryPolicyBuilder().WithDelay(0).Build()
				return failsafehttp.NewRoundTripper(base, retry, hedgepolicy.NewWithDelay[*http.Response](hedgeDelay)), func() {}
			}},
		}},
	}
}

// BenchmarkHappyPathWith: the in-memory happy GET with a feature on
// (opt=breaker, metrics, hedge), for the libraries that have it and the
// bare transport.
func BenchmarkHappyPathWith(b *testing.B) {
	for _, f := range features() {
		for _, p := range f.peers {
			b.Run("opt="+f.name+"/lib="+p.name, withFeature(p))
		}
	}
}

// withFeature is the body of a row of BenchmarkHappyPathWith.
func withFeature(p featurePeer) func(*testing.B) {
	return func(b *testing.B) {
		rt, done := p.wrap(memTransport{})
		defer done()
		sequential(rt, "http://example.test/", newGET)(b)
	}
}
