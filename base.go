package retryhttp

import (
	"net/http"
	"sync"

	"github.com/hashicorp/go-cleanhttp"
)

// sharedBase is the base transport of every Transport made without
// WithTransport (or with WithTransport(nil)): one pooled transport from
// github.com/hashicorp/go-cleanhttp, made on first use and shared by the
// whole process, as http.DefaultTransport is shared by the http.Clients that
// name no transport. Sharing it is what keeps a Transport made per call
// (&http.Client{Transport: New()} inside a function) from opening a
// connection pool per call and leaving its connections open.
//
// go-cleanhttp's settings, rather than http.DefaultTransport itself, so that
// code elsewhere in the process that changes http.DefaultTransport does not
// change this one.
var sharedBase = sync.OnceValue(func() *http.Transport {
	return cleanhttp.DefaultPooledTransport()
})

// DefaultBaseTransport returns the base transport of every Transport made
// without WithTransport: an *http.Transport with go-cleanhttp's pooled
// settings, shared by the whole process. Wrap it to put a RoundTripper
// (tracing, auth) below the retries while keeping that shared connection
// pool:
//
//	tr := retryhttp.New(retryhttp.WithTransport(otelhttp.NewTransport(retryhttp.DefaultBaseTransport())))
//
// It must not be modified (its settings are every default Transport's): for
// a pool of your own with the same settings, use
// cleanhttp.DefaultPooledTransport() from github.com/hashicorp/go-cleanhttp
// and change that. docs/observability.md shows both.
func DefaultBaseTransport() http.RoundTripper {
	return sharedBase()
}
