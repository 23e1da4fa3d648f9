package server

import (
	"errors"
	"testing"

	"google.golang.org/grpc"
)

type closableRegistrar struct{ closed *[]string }

func (closableRegistrar) Register(grpc.ServiceRegistrar) {}

func (c closableRegistrar) Close() error {
	*c.closed = append(*c.closed, "service")
	return errors.New("service close failed")
}

func TestWithCloseRunsBothCleanups(t *testing.T) {
	var closed []string
	r := WithClose(closableRegistrar{&closed}, func() error {
		closed = append(closed, "extra")
		return nil
	})
	err := r.(interface{ Close() error }).Close()
	if len(closed) != 2 || closed[0] != "service" || closed[1] != "extra" {
		t.Fatalf("closed %v, want service then extra", closed)
	}
	if err == nil || err.Error() != "service close failed" {
		t.Fatalf("err = %v, want the service's close error", err)
	}
}
