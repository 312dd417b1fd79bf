module github.com/seed2409de8f/retryhttp/bench/storm

go 1.24.0

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/hashicorp/go-cleanhttp v0.5.2
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/seed2409de8f/retryhttp v0.1.0
	github.com/seed2409de8f/retryhttp/otelretryhttp v0.1.0
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/otel/sdk/metric v1.38.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.38.0 // indirect
	go.opentelemetry.io/otel/metric v1.38.0 // indirect
	go.opentelemetry.io/otel/sdk v1.38.0 // indirect
	go.opentelemetry.io/otel/trace v1.38.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.35.0 // indirect
)
