package intent

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

var (
	// pathMention matches a file system path: one starting with ./, ../, ~/ or /, one with at
	// least two slashes, or a directory name ending in a slash.
	pathMention = regexp.MustCompile(`(?:^|[\s"'(` + "`" + `])(?:(?:\.{1,2}/|~/|/)[\w.-]+(?:/[\w.-]*)*|[\w.-]+/[\w.-]+/[\w./-]*|[\w.-]+/(?:$|[\s"')` + "`" + `]))`)
	// fileMention matches a file name with a known extension, a dotfile or a well-known file.
	fileMention = regexp.MustCompile(`(?i)\b[\w-]+\.(?:go|mod|sum|py|js|mjs|cjs|ts|tsx|jsx|json|yaml|yml|toml|md|txt|sh|bash|zsh|rs|java|kt|c|h|cc|cpp|hpp|cs|rb|php|html|css|scss|sql|csv|xml|ini|cfg|conf|env|lock|proto|swift|lua|ipynb|gradle|tf)\b` +
		`|(?:^|[\s"'(` + "`" + `])\.(?:env|gitignore|dockerignore|bashrc|zshrc|profile|editorconfig)\b` +
		`|\b(?:Makefile|Dockerfile|Gemfile|Rakefile|Jenkinsfile|Containerfile|Procfile)\b`)
	// frameworkNames look like file names but name JavaScript frameworks.
	frameworkNames = regexp.MustCompile(`(?i)\b(?:node|vue|next|nuxt|react|express|three|d3|chart|angular|ember|backbone|alpine|moment)\.js\b`)
	// commandVerbs start a request to run a workspace command.
	commandVerbs = []string{"run", "execute", "install", "build", "compile", "test", "lint"}
	// backticked matches an inline `command`.
	backticked = regexp.MustCompile("`[^`]+`")
	// fileEdit matches a request to change a file, directory or folder.
	fileEdit = regexp.MustCompile(`(?i)\b(?:edit|create|delete|remove|modify|rename|move|update|write|fix|change)\b[^.?!]*\b(?:files?|director(?:y|ies)|folders?)\b`)
)

// toolPolicy returns the deterministic tool policy of a goal and the rule that fired
// (Monolith §Phase 2b ContractFactory defaults, see the package documentation).
func toolPolicy(surface typev1.Surface, goal string, tools []string) (typev1.ToolPolicy, string) {
	if surface == typev1.Surface_SURFACE_CHAT {
		return typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN, "chat surface: tools are forbidden"
	}
	if surface == typev1.Surface_SURFACE_CODE {
		if why, ok := workspaceIntent(goal); ok {
			return typev1.ToolPolicy_TOOL_POLICY_REQUIRED, "code surface with explicit workspace intent: " + why
		}
	}
	if tool, ok := namedTool(goal, tools); ok {
		return typev1.ToolPolicy_TOOL_POLICY_REQUIRED, fmt.Sprintf("the message asks for the tool %q", tool)
	}
	if surface == typev1.Surface_SURFACE_CODE {
		return typev1.ToolPolicy_TOOL_POLICY_OPTIONAL, "code surface without file, command or workspace intent: tools are optional"
	}
	return typev1.ToolPolicy_TOOL_POLICY_OPTIONAL, "api surface: tools are optional"
}

// workspaceIntent reports whether a goal explicitly concerns files, commands or the
// workspace, and why.
func workspaceIntent(goal string) (string, bool) {
	if m := asked(backticked, goal); m != "" {
		return "contains the command " + m, true
	}
	if m := pathMention.FindString(goal); m != "" {
		return fmt.Sprintf("mentions the path %q", strings.TrimLeft(m, " \"'(`")), true
	}
	if m := fileMention.FindString(frameworkNames.ReplaceAllString(goal, "")); m != "" {
		return fmt.Sprintf("mentions the file %q", strings.TrimLeft(m, " \"'(`")), true
	}
	if w := leadWord(goal); slices.Contains(commandVerbs, w) {
		return fmt.Sprintf("asks to %s a command", w), true
	}
	if asked(fileEdit, goal) != "" {
		return "asks to change a file or directory", true
	}
	return "", false
}
