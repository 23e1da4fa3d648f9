package xmltransport

import "fmt"

// Mode is the tool transport of a run.
type Mode string

// The tool transports.
const (
	// ModeNative uses provider tool calls only; tool choice may be "required".
	ModeNative Mode = "native"
	// ModeXMLFinal keeps provider tool calls for tools but takes the final report from the
	// XML final slot; tool choice is "auto".
	ModeXMLFinal Mode = "xml-final"
	// ModeXML withholds provider tool definitions: every tool, the progress note and the
	// final report go through XML tags; tool choice is "auto".
	ModeXML Mode = "xml"
)

// ParseMode reads a configured transport; "" is ModeNative (the configuration's default).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeNative, nil
	case ModeNative, ModeXMLFinal, ModeXML:
		return m, nil
	}
	return "", fmt.Errorf("unknown tool transport %q (want native, xml-final or xml)", s)
}

// ProviderTools reports whether tool definitions are sent to the provider (native and
// xml-final); in xml mode they are withheld and XML is the only invocation path.
func (m Mode) ProviderTools() bool { return m != ModeXML }

// XMLTools reports whether tools are invoked through numbered XML slots (xml mode only).
func (m Mode) XMLTools() bool { return m == ModeXML }

// XMLFinal reports whether the final report comes from the XML final slot (xml-final and
// xml).
func (m Mode) XMLFinal() bool { return m == ModeXMLFinal || m == ModeXML }

// Progress reports whether the progress slot is offered (xml mode only, not xml-final).
func (m Mode) Progress() bool { return m == ModeXML }

// PastMessages reports whether tool responses are returned as XML-PAST user messages (xml
// mode); xml-final keeps native tool messages.
func (m Mode) PastMessages() bool { return m == ModeXML }

// ToolChoice is the provider tool choice for a turn: "auto" in the XML modes, and in native
// mode "required" when the turn must call a tool, else "auto".
func (m Mode) ToolChoice(toolRequired bool) string {
	if m == ModeNative && toolRequired {
		return "required"
	}
	return "auto"
}
