// Package toolname holds the rules of tool names that more than one part of the mesh applies:
// the names the orchestrator reserves for its own tools, which no tool of the action stage
// may have.
package toolname

import (
	"slices"
	"strings"
)

// The orchestrator's own tools, which it offers the model and handles itself: they are never
// sent to the action stage.
const (
	// FinalReport is the tool the model gives its final answer with (native tool transport).
	FinalReport = "final_report"
	// XMLFinalReport is the tool of the XML transport's final-report slot.
	XMLFinalReport = "agent__final_report"
	// XMLProgressReport is the tool of the XML transport's progress slot.
	XMLProgressReport = "agent__progress_report"
)

// reserved are the orchestrator's own tools' names.
var reserved = []string{FinalReport, XMLFinalReport, XMLProgressReport}

// Reserved reports whether name is the name of one of the orchestrator's own tools. A tool of
// the action stage of that name would be offered to the model beside the orchestrator's (a
// provider refuses a request offering two tools of one name) or never run, since the
// orchestrator takes a call of that name as its own.
func Reserved(name string) bool { return slices.Contains(reserved, name) }

// ReservedNames lists the reserved names, for an error message: "final_report,
// agent__final_report, agent__progress_report".
func ReservedNames() string { return strings.Join(reserved, ", ") }
