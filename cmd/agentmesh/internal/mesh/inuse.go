package mesh

import (
	"errors"
	"fmt"
	"syscall"
)

// movable adds to err, service's failure to listen on its configured address, the key that
// moves it when another listener holds the address (on macOS the AirPlay receiver holds 7000,
// the orchestrator's default), so that a newcomer whose first `agentmesh dev` fails so is
// told what to change.
func movable(service string, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	return fmt.Errorf("%w; set services.%s in agentmesh.yaml to a free host:port", err, service)
}
