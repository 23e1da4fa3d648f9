package action

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	_ "time/tzdata" // IANA zones even where the host has none

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// clockTool is the current_time built-in.
type clockTool struct {
	def *typev1.Tool
	now func() time.Time
}

func newClockTool(now func() time.Time) (*clockTool, error) {
	schema, err := objectSchema(map[string]any{
		"timezone": map[string]any{
			"type":        "string",
			"description": "IANA time zone name such as \"Europe/Berlin\"; defaults to UTC.",
		},
	})
	if err != nil {
		return nil, err
	}
	return &clockTool{now: now, def: &typev1.Tool{
		Name:        "current_time",
		Description: "Returns the current date and time (RFC 3339), the weekday and the time zone.",
		InputSchema: schema,
		Server:      BuiltinServer,
		Idempotent:  true,
	}}, nil
}

// Definition describes current_time.
func (t *clockTool) Definition() *typev1.Tool { return t.def }

// clockReading is current_time's result.
type clockReading struct {
	Time         string `json:"time"`
	Weekday      string `json:"weekday"`
	Timezone     string `json:"timezone"`
	Abbreviation string `json:"abbreviation"`
}

// Call reads the clock in the requested zone.
func (t *clockTool) Call(_ context.Context, call Call) (string, error) {
	name, _ := call.Arguments["timezone"].(string)
	if name == "" {
		name = "UTC"
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" { // the host's zone means nothing to the caller
		return "", fmt.Errorf("unknown timezone %q: use an IANA name such as \"Europe/Berlin\" or \"UTC\"", name)
	}
	now := t.now().In(loc)
	abbreviation, _ := now.Zone()
	out, err := json.Marshal(clockReading{
		Time:         now.Format(time.RFC3339),
		Weekday:      now.Weekday().String(),
		Timezone:     loc.String(),
		Abbreviation: abbreviation,
	})
	if err != nil {
		return "", err
	}
	return string(out), nil
}
