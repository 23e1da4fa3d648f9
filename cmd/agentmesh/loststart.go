package main

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// lostStartError is err, the failure of a watch of run runID refused because the events it
// asked for are no longer kept (the event stream's limits dropped them), read from its status
// detail (events.LostStart), as an invalid argument, exit 4, naming the CLI's own flag that
// follows the run from its first event kept, --from, where the server's message names the
// API's from_seq; nil for any other failure.
func lostStartError(runID string, err error) error {
	cause, from, ok := events.LostStart(err)
	if !ok {
		return nil
	}
	return exitcode.Wrap(exitcode.Invalid, fmt.Errorf(
		"%s; follow the run from its first event kept with: agentmesh watch %s --from %d",
		cause, runID, from))
}
