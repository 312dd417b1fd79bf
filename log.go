package retryhttp

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/redact"
)

// Levels of the records written to the logger of WithLogger.
const (
	// LogLevelRetry is the level of the record written for each retry:
	// Info, since a retry is worth seeing in a healthy system's logs (it
	// means a backend failed, and was covered for) without being an error.
	LogLevelRetry = slog.LevelInfo

	// LogLevelGiveUp is the level of the record written when the transport
	// gives up (StopReason.GaveUp): the caller gets a failure that retrying
	// could not, or was not allowed to, cover.
	LogLevelGiveUp = slog.LevelWarn

	// LogLevelPark is the level of the records written when a wait in the
	// retry budget begins ("retryhttp: parked") and when it is released
	// ("retryhttp: released"), as Hooks.OnPark sees them (ParkEvent): a
	// parked retry, a retry in the pause lane, a first attempt held by
	// WithHoldDuringPause. Debug, since the retry or the giving up
	// that follows is written too. Their attributes: method, url, attempt
	// (0 for a held first attempt), waited (for a release), window,
	// in_flight and parked.
	LogLevelPark = slog.LevelDebug

	// LogLevelQuotaHold is the level of the record written when a request
	// is held because its advertised quota is spent ("retryhttp: quota
	// hold", WithQuotaPacing): Debug, since holds are the quota's pace,
	// as many as a window's excess requests. Its attributes are method,
	// url, attempt, scope, policy (if named), remaining and wait.
	LogLevelQuotaHold = slog.LevelDebug
)

// WithLogger makes the transport write a record to logger for each retry
// (at LogLevelRetry, message "retryhttp: retrying"), when it gives up
// (at LogLevelGiveUp, message "retryhttp: giving up", for the reasons of
// StopReason.GaveUp), and when a wait in the retry budget begins and ends
// (at LogLevelPark, with the attributes that LogLevelPark lists). A request
// whose first attempt succeeds without waiting, or that fails in a way that
// is never retried, or is cancelled by its caller, writes nothing. nil, the
// default, writes nothing at all.
//
// Each retry and give-up record has these attributes:
//
//	method        the request's method
//	url           scheme://host/path: never the query, the fragment or the userinfo
//	attempt       the number of the attempt just made (1 for the first);
//	              for giving up, the number of attempts sent
//	max_attempts  the request's retry limit plus one
//	delay         the wait before the retry (retries only), rounded to
//	              0.1 ms (to 1 µs below 1 ms): 9.2ms, not 9.159045ms
//	status        the response's status code, if the attempt brought one
//	error         otherwise, its error, with the request's URL replaced by
//	              the url above
//	reason        for a retry, Decision.Cause ("status", "timeout", …);
//	              for giving up, the StopReason ("retries exhausted", …)
//
// Records are written with the request's context, synchronously, on the
// goroutine of the request. docs/observability.md shows examples.
func WithLogger(logger *slog.Logger) Option {
	return func(t *Transport) {
		if logger != nil || t.obs != nil {
			t.observer().logger = logger
		}
	}
}

// log writes the record of a decision, if any.
func (o *observer) log(d Decision) {
	l := o.logger
	if l == nil {
		return
	}
	level, msg, reason := LogLevelRetry, "retryhttp: retrying", d.Cause()
	if !d.Retry {
		if !d.Reason.GaveUp() {
			return
		}
		level, msg, reason = LogLevelGiveUp, "retryhttp: giving up", d.Reason.String()
	}
	a := d.Attempt
	ctx := context.Background()
	if a.Req != nil {
		ctx = a.Req.Context()
	}
	if !l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 7)
	var u string
	if a.Req != nil {
		u = redactURL(a.Req.URL)
		attrs = append(attrs, slog.String("method", method(a.Req)), slog.String("url", u))
	}
	attrs = append(attrs,
		slog.Int("attempt", a.Count),
		slog.Int("max_attempts", d.MaxRetries+1))
	if d.Retry {
		attrs = append(attrs, slog.Duration("delay", roundDelay(d.Delay)))
	}
	switch {
	case a.Res != nil:
		attrs = append(attrs, slog.Int("status", a.Res.StatusCode))
	case a.Err != nil:
		attrs = append(attrs, slog.String("error", redact.Err(a.Err, a.Req, u)))
	}
	attrs = append(attrs, slog.String("reason", reason))
	l.LogAttrs(ctx, level, msg, attrs...)
}

// roundDelay rounds a retry's wait for a log record: to 0.1 ms, or to 1 µs
// below 1 ms, so that a short wait does not print as 0.
func roundDelay(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

// method returns req's method, with net/http's meaning of "".
func method(req *http.Request) string {
	if req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}

// redactURL returns u as scheme://host/path, without the userinfo, the
// query and the fragment, which may carry secrets.
func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// reportQuotaHold reports a quota hold to the hooks and the logger.
func (o *observer) reportQuotaHold(h QuotaHold) {
	if o == nil {
		return
	}
	for _, fn := range o.onQuota {
		fn(h)
	}
	l, a := o.logger, h.Attempt
	if l == nil || a.Req == nil {
		return
	}
	ctx := a.Req.Context()
	if !l.Enabled(ctx, LogLevelQuotaHold) {
		return
	}
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs, slog.String("method", method(a.Req)), slog.String("url", redactURL(a.Req.URL)),
		slog.Int("attempt", a.Count), slog.String("scope", h.Scope))
	if h.Policy != "" {
		attrs = append(attrs, slog.String("policy", h.Policy))
	}
	attrs = append(attrs, slog.Int64("remaining", h.Remaining), slog.Duration("wait", roundDelay(h.Wait)))
	l.LogAttrs(ctx, LogLevelQuotaHold, "retryhttp: quota hold", attrs...)
}
