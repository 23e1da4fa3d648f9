package server

import (
	"errors"
	"testing"
)

func TestCheckExposure(t *testing.T) {
	for _, tc := range []struct {
		addr                    string
		authenticated, insecure bool
		exposed                 bool
	}{
		{"127.0.0.1:7000", false, false, false},
		{"[::1]:7000", false, false, false},
		{"localhost:7000", false, false, false},
		{":7000", false, false, true},
		{"0.0.0.0:7000", false, false, true},
		{"10.0.0.5:7000", false, false, true},
		{"0.0.0.0:7000", true, false, false},
		{"0.0.0.0:7000", false, true, false},
		{"not an address", false, false, true},
	} {
		err := CheckExposure(tc.addr, tc.authenticated, tc.insecure)
		if got := errors.Is(err, ErrExposed); got != tc.exposed {
			t.Errorf("CheckExposure(%q, authenticated %v, insecure %v) = %v, want exposed %v", tc.addr, tc.authenticated, tc.insecure, err, tc.exposed)
		}
	}
}
