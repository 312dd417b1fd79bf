package hostpattern

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		give    string
		want    Pattern
		problem bool
	}{
		{"API.example.com.", Pattern{Name: "api.example.com"}, false},
		{"api.example.com:8443", Pattern{Name: "api.example.com", Port: "8443"}, false},
		{"*.example.com", Pattern{Name: "example.com", Wildcard: true}, false},
		{"[::1]:80", Pattern{Name: "::1", Port: "80"}, false},
		{"::1", Pattern{Name: "::1"}, false},
		{"http://api.example.com", Pattern{}, true},
		{"a b", Pattern{}, true},
		{"api.*.com", Pattern{}, true},
		{"*.example.com:80", Pattern{}, true},
		{"h:0", Pattern{}, true},
		{"h:080", Pattern{}, true},
		{"[1.2.3.4]", Pattern{}, true},
		{"a..b", Pattern{}, true},
		{"", Pattern{}, true},
	}
	for _, tt := range tests {
		got, problem := Check(tt.give)
		assert.Equal(t, tt.want, got, "%q", tt.give)
		assert.Equal(t, tt.problem, problem != "", "%q: %s", tt.give, problem)
	}
}

func TestCoversAndString(t *testing.T) {
	tests := []struct {
		h, h2 string
		want  bool
	}{
		{"*.example.com", "api.example.com:8443", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "*.eu.example.com", true},
		{"api.example.com", "api.example.com:8443", true},
		{"api.example.com:8443", "api.example.com", false},
		{"api.example.com", "*.api.example.com", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Parse(tt.h).Covers(Parse(tt.h2)), "%s covers %s", tt.h, tt.h2)
	}
	for _, s := range []string{"api.example.com", "h:80", "*.example.com", "[::1]:80", "[::1]"} {
		assert.Equal(t, s, Parse(s).String())
	}
}
