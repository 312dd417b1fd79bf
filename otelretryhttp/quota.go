package otelretryhttp

import (
	"context"
	"strings"

	"github.com/seed2409de8f/retryhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Names of the gauges of the advertised quotas (ObserveQuotas).
const (
	// QuotaRemainingName gauges the remaining count of a quota, as its
	// server last stated it for the current window.
	QuotaRemainingName = "retryhttp.client.quota.remaining"
	// QuotaLimitName gauges a quota's window: as stated, or else the
	// highest count seen.
	QuotaLimitName = "retryhttp.client.quota.limit"
	// QuotaInFlightName gauges the requests sent against a quota and not
	// yet answered.
	QuotaInFlightName = "retryhttp.client.quota.inflight"
)

// Attributes of the quota gauges, beside the destination's.
const (
	// QuotaScopeKey is the scope a caller named (retryhttp.WithQuotaScope);
	// absent for the host's own.
	QuotaScopeKey = attribute.Key("retryhttp.quota.scope")
	// QuotaPolicyKey is the server's name for the quota (an IETF policy,
	// GitHub's resource); absent when it names none.
	QuotaPolicyKey = attribute.Key("retryhttp.quota.policy")
)

// ObserveQuotas makes mp's meter (nil: the global meter provider) report
// the advertised quotas the process's Transports pace to
// (retryhttp.WithQuotaPacing), read from retryhttp.Quotas when the metrics
// are collected: nothing is recorded per request. Each data point has the
// destination's url.scheme, server.address and server.port, the scope's
// name (QuotaScopeKey) and the policy's (QuotaPolicyKey) when given, and
// attrs; the number of series is bounded by the quotas kept (1024 scopes
// of 16 quotas at most). Unregister the returned registration to stop. It
// fails if an instrument cannot be made.
func ObserveQuotas(mp metric.MeterProvider, attrs ...attribute.KeyValue) (metric.Registration, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	remaining, err := m.Int64ObservableGauge(QuotaRemainingName, metric.WithUnit("{request}"),
		metric.WithDescription("Remaining count of an advertised quota, as its server last stated it."))
	if err != nil {
		return nil, err
	}
	limit, err := m.Int64ObservableGauge(QuotaLimitName, metric.WithUnit("{request}"),
		metric.WithDescription("Quota of an advertised quota's window."))
	if err != nil {
		return nil, err
	}
	inflight, err := m.Int64ObservableGauge(QuotaInFlightName, metric.WithUnit("{request}"),
		metric.WithDescription("Requests sent against an advertised quota and not yet answered."))
	if err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for q := range retryhttp.Quotas() {
			dest, name, _ := strings.Cut(q.Scope, "#")
			extra := attrs
			if name != "" || q.Policy != "" {
				extra = append(make([]attribute.KeyValue, 0, len(attrs)+2), attrs...)
				if name != "" {
					extra = append(extra, QuotaScopeKey.String(name))
				}
				if q.Policy != "" {
					extra = append(extra, QuotaPolicyKey.String(q.Policy))
				}
			}
			opt := metric.WithAttributeSet(destinationAttrs(dest, extra))
			o.ObserveInt64(remaining, q.Remaining, opt)
			o.ObserveInt64(limit, q.Limit, opt)
			o.ObserveInt64(inflight, int64(q.InFlight), opt)
		}
		return nil
	}, remaining, limit, inflight)
}
