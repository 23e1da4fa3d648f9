package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolError is a tool result the server marked as an error (isError): the tool ran and failed.
type ToolError struct {
	// Text is the result's text, the server's explanation.
	Text string
}

// Error returns the server's explanation.
func (e *ToolError) Error() string {
	if e.Text == "" {
		return "the tool reported an error without a message"
	}
	return e.Text
}

// resultText joins the text of a tool result's content, one block per line. Text resources
// count as text; other blocks are named in brackets so the model knows they were there, with
// their MIME type and size (and a resource link's name and description). A result without
// content is its structured content as JSON.
func resultText(res *sdk.CallToolResult) string {
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				size := int64(len(c.Resource.Blob))
				parts = append(parts, described("resource "+c.Resource.URI, "", c.Resource.MIMEType, &size, ""))
			}
		case *sdk.ResourceLink:
			parts = append(parts, described("resource link "+c.URI, c.Name, c.MIMEType, c.Size, c.Description))
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}

// described names a block in brackets: what it is, then its name, MIME type and size, each
// when known, then its description after a colon.
func described(what, name, mimeType string, size *int64, description string) string {
	var b strings.Builder
	b.WriteString("[" + what)
	for _, s := range []string{name, mimeType} {
		if s != "" {
			b.WriteString(", " + s)
		}
	}
	if size != nil {
		fmt.Fprintf(&b, ", %d bytes", *size)
	}
	if description != "" {
		b.WriteString(": " + description)
	}
	b.WriteString("]")
	return b.String()
}
