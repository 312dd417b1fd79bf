package hostmap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"net/http/httptest"
)

func TestHostKey(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "http://example.com/a?b", want: "http://example.com:80"},
		{give: "http://example.com:80/", want: "http://example.com:80"},
		{give: "https://example.com/", want: "https://example.com:443"},
		{give: "https://example.com:8443/", want: "https://example.com:8443"},
		{give: "http://user:pw@127.0.0.1:8080/x", want: "http://127.0.0.1:8080"},
		{give: "http://[::1]/", want: "http://[::1]:80"},
		{give: "http://[::1]:9000/", want: "http://[::1]:9000"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, KeyOf(httptest.NewRequest("GET", tt.give, nil)).String())
		})
	}
}
