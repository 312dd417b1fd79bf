package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// policy is a retry policy under test: how to make the transport of a client
// that follows it. Every policy is a retryhttp.Transport configured through
// its public options, so that the rows differ only in the policy.
type policy struct {
	name  string
	about string // one line for the report

	// transport returns a client transport following the policy over base,
	// with every wait multiplied by waitScale, and the scenario's extra
	// options (an attempt timeout, say) applied last.
	transport func(base http.RoundTripper, waitScale float64, extra ...retryhttp.Option) http.RoundTripper

	// perClient gives each client a transport of its own (a fleet of
	// processes), instead of one shared by all the clients of a run (one
	// process with many concurrent callers).
	perClient bool

	// pushback wraps the handler of every hop of the chain scenario in
	// inbound.Pushback.
	pushback bool
}

// noWait is the delay of the immediate policies.
func noWait(retryhttp.Attempt) time.Duration { return 0 }

// exponential is backoff without jitter: 250ms before the first retry, then
// doubling, up to 10s, whatever the response says (Retry-After ignored).
func exponential(a retryhttp.Attempt) time.Duration {
	d := 250 * time.Millisecond << min(a.Count-1, 6)
	return min(d, 10*time.Second)
}

// scaled multiplies every wait of fn by scale; fn nil means
// retryhttp.DefaultDelayFn. It returns nil (no option: the transport's own
// default) for the default delays unscaled.
func scaled(fn retryhttp.DelayFn, scale float64) retryhttp.Option {
	if fn == nil {
		if scale == 1 {
			return nil
		}
		fn = retryhttp.DefaultDelayFn
	}
	if scale == 1 {
		return retryhttp.WithDelayFn(fn)
	}
	return retryhttp.WithDelayFn(func(a retryhttp.Attempt) time.Duration {
		return time.Duration(float64(fn(a)) * scale)
	})
}

// newTransport returns retryhttp.New(opts..., extra...): a policy's options,
// then the scenario's.
func newTransport(extra []retryhttp.Option, opts ...retryhttp.Option) http.RoundTripper {
	return retryhttp.New(append(opts, extra...)...)
}

// noRetriesPolicy sends each request once.
func noRetriesPolicy() policy {
	return policy{
		name:  "no retries",
		about: "WithMaxRetries(0): one attempt per request",
		transport: func(base http.RoundTripper, _ float64, extra ...retryhttp.Option) http.RoundTripper {
			return newTransport(extra, retryhttp.WithTransport(base), retryhttp.WithMaxRetries(0))
		},
	}
}

// immediatePolicy retries at once, 3 times, with no budget.
func immediatePolicy() policy {
	return policy{
		name:  "immediate retry",
		about: "3 retries, no wait, no budget",
		transport: func(base http.RoundTripper, scale float64, extra ...retryhttp.Option) http.RoundTripper {
			return newTransport(extra, retryhttp.WithTransport(base), retryhttp.WithRetryBudget(nil), scaled(noWait, scale))
		},
	}
}

// exponentialPolicy backs off without jitter, with no budget.
func exponentialPolicy() policy {
	return policy{
		name:  "exponential, no jitter",
		about: "3 retries after 250ms, 500ms, 1s exactly; Retry-After ignored; no budget",
		transport: func(base http.RoundTripper, scale float64, extra ...retryhttp.Option) http.RoundTripper {
			return newTransport(extra, retryhttp.WithTransport(base), retryhttp.WithRetryBudget(nil), scaled(exponential, scale))
		},
	}
}

// fullJitterPolicy is retryhttp's delays without its budget.
func fullJitterPolicy() policy {
	return policy{
		name:  "full jitter",
		about: "retryhttp's waits (full jitter 250ms·2^n, Retry-After ±1/3), budget off: WithRetryBudget(nil)",
		transport: func(base http.RoundTripper, scale float64, extra ...retryhttp.Option) http.RoundTripper {
			return newTransport(extra, retryhttp.WithTransport(base), retryhttp.WithRetryBudget(nil), scaled(nil, scale))
		},
	}
}

// defaultsPolicy is retryhttp as New makes it: full jitter and a retry
// budget, one Transport for all the clients of a run.
func defaultsPolicy() policy {
	return policy{
		name:  "retryhttp defaults",
		about: "retryhttp.New(): full jitter + retry budget; one Transport shared by the clients",
		transport: func(base http.RoundTripper, scale float64, extra ...retryhttp.Option) http.RoundTripper {
			return newTransport(extra, retryhttp.WithTransport(base), scaled(nil, scale))
		},
	}
}

// defaultsPerClientPolicy is defaultsPolicy with a Transport per client,
// made by retryhttp.New() as code that makes one per call does: the
// Transports share the process's default budget, so the row shows that
// this pattern is as storm-safe as one shared Transport.
func defaultsPerClientPolicy() policy {
	p := defaultsPolicy()
	p.name = "defaults, Transport per client"
	p.about = "retryhttp.New() in every client: they share the process's default budget, as Transports made per call do"
	p.perClient = true
	return p
}

// naivePolicy is the classic per-hop retry of the chain illustration: 3
// tries (2 retries) at once, with no budget; 503 on a GET is retried.
func naivePolicy() policy {
	return policy{
		name:  "naive",
		about: "3 tries per hop (2 retries), no wait, no budget",
		transport: func(base http.RoundTripper, scale float64, extra ...retryhttp.Option) http.RoundTripper {
			return newTransport(extra, retryhttp.WithTransport(base), retryhttp.WithRetryBudget(nil),
				retryhttp.WithMaxRetries(2), scaled(noWait, scale))
		},
	}
}

// stormPolicies are the rows of the herd scenario.
func stormPolicies() []policy {
	return []policy{immediatePolicy(), exponentialPolicy(), fullJitterPolicy(), defaultsPolicy(), defaultsPerClientPolicy()}
}

// metastablePolicies are the rows of the metastable and flaky scenarios:
// the herd's, and no retries at all for reference.
func metastablePolicies() []policy {
	return append([]policy{noRetriesPolicy()}, stormPolicies()...)
}

// overloadPolicies are the rows of the overload scenario.
func overloadPolicies() []policy {
	return []policy{immediatePolicy(), exponentialPolicy(), fullJitterPolicy(), defaultsPolicy()}
}

// freshDefaultsPolicy is defaultsPolicy with a retry budget of its own,
// made anew for every transport (retryhttp.NewRetryBudget with the default
// options), so that rows run one after the other, or side by side, do not
// share the process's default budget.
func freshDefaultsPolicy() policy {
	p := defaultsPolicy()
	p.about = "retryhttp.New() with a fresh default budget per row (WithRetryBudget(NewRetryBudget(RetryBudgetOptions{}))): full jitter + retry budget"
	p.transport = func(base http.RoundTripper, scale float64, extra ...retryhttp.Option) http.RoundTripper {
		return newTransport(extra, retryhttp.WithTransport(base),
			retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})), scaled(nil, scale))
	}
	return p
}

// retryablehttpPolicy mimics the defaults of hashicorp/go-retryablehttp
// v0.7.8 (NewClient: RetryMax 4, RetryWaitMin 1s, RetryWaitMax 30s,
// DefaultRetryPolicy, DefaultBackoff) with retryhttp's public options: no
// budget, 4 retries, retryablehttpShouldRetry and retryablehttpDelay.
func retryablehttpPolicy() policy {
	return policy{
		name: "go-retryablehttp policy",
		about: "go-retryablehttp v0.7.8's defaults: 4 retries of any method on a transport error, 429 or 5xx but 501; " +
			"wait exactly Retry-After (seconds) on a 429 or 503 with one, else 1s·2^(n-1) up to 30s, no jitter; no budget",
		transport: func(base http.RoundTripper, scale float64, extra ...retryhttp.Option) http.RoundTripper {
			return newTransport(extra, retryhttp.WithTransport(base), retryhttp.WithRetryBudget(nil), retryhttp.WithMaxRetries(4),
				retryhttp.WithShouldRetryFn(retryablehttpShouldRetry), scaled(retryablehttpDelay, scale))
		},
	}
}

// retryablehttpShouldRetry is go-retryablehttp's DefaultRetryPolicy: no
// retry once the caller's context is done; otherwise a retry on any
// transport error (it leaves out a few it recognises by their message: too
// many redirects, a bad scheme or header, an untrusted certificate, none of
// which the lab meets), on 429, and on every 5xx but 501, whatever the
// method.
func retryablehttpShouldRetry(a retryhttp.Attempt) bool {
	switch {
	case a.Req != nil && a.Req.Context().Err() != nil:
		return false
	case a.Err != nil:
		return true
	case a.Res == nil:
		return false
	case a.Res.StatusCode == http.StatusTooManyRequests:
		return true
	}
	code := a.Res.StatusCode
	return code == 0 || code >= 500 && code != http.StatusNotImplemented
}

// retryablehttpDelay is go-retryablehttp's DefaultBackoff with its default
// bounds: on a 429 or 503 with a Retry-After of whole seconds (it also reads
// HTTP-dates, which the lab's servers do not send), exactly that; else
// 1s·2^(n-1) before retry n, capped at 30s; no jitter.
func retryablehttpDelay(a retryhttp.Attempt) time.Duration {
	if res := a.Res; res != nil && (res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable) {
		if v := res.Header.Values("Retry-After"); len(v) > 0 {
			if s, err := strconv.ParseInt(v[0], 10, 64); err == nil && s >= 0 {
				return time.Duration(min(s, int64(time.Duration(1<<62)/time.Second))) * time.Second
			}
		}
	}
	return min(time.Second<<min(max(a.Count-1, 0), 5), 30*time.Second)
}

// closedLoopPolicies are the rows of the ratelimit and blip scenarios.
func closedLoopPolicies() []policy {
	return []policy{freshDefaultsPolicy(), fullJitterPolicy(), retryablehttpPolicy()}
}

// rateLimitPolicies are the rows of the ratelimit scenario: the closed
// loops', and the defaults holding every request while a stated pause runs.
func rateLimitPolicies() []policy {
	return append(closedLoopPolicies(), holdPolicy())
}

// holdPolicy is freshDefaultsPolicy with WithHoldDuringPause(true).
func holdPolicy() policy {
	p := freshDefaultsPolicy()
	p.name = "defaults, hold during pause"
	p.about = "freshDefaultsPolicy with WithHoldDuringPause(true): every request to the host waits while its stated pause runs"
	p.transport = func(base http.RoundTripper, scale float64, extra ...retryhttp.Option) http.RoundTripper {
		return newTransport(extra, retryhttp.WithTransport(base), retryhttp.WithHoldDuringPause(true),
			retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})), scaled(nil, scale))
	}
	return p
}

// newBase returns the pooled base transport of one run: enough idle
// connections per host for every concurrent request, so that the run does not
// churn through ephemeral ports.
func newBase() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
}
