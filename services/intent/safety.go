package intent

import (
	"regexp"
	"strings"
)

// denyRule is one clearly harmful intent the service refuses.
type denyRule struct {
	// what names the intent in the INTENT_UNSAFE message.
	what string
	// pattern matches the normalised goal (lower case, whitespace collapsed).
	pattern *regexp.Regexp
}

// benignCompounds are harmless phrases containing a denied word; they are blanked out before
// the deny-list is applied ("bath bomb", "bomb shelter", "trojan horse").
var benignCompounds = regexp.MustCompile(`\b(?:bath|seed|photo|glitter|flavou?r|calorie|f)[- ]?bombs?\b|\bbombs?[- ]?(?:shelters?|squads?|disposal|detectors?|proof)\b|\btrojan horses?\b`)

// denyList is the conservative list of clearly harmful intents. Every pattern needs a verb of
// making or doing aimed directly at the harmful object, so questions about the topic, defence
// against it and look-alike phrases pass.
var denyList = []denyRule{
	{
		what: "instructions to build explosives or chemical or biological weapons",
		pattern: regexp.MustCompile(`\b(?:make|build|assemble|construct|manufacture|create|synthesi[sz]e|produce|cook)\s+` +
			`(?:me\s+)?(?:(?:a|an|some)\s+)?(?:(?:homemade|home-made|working|real|powerful|improvised|pipe|nail|car|dirty|fertili[sz]er)\s+)*` +
			`(?:bombs?\b|explosives\b|explosive devices?\b|explosive(?:$|[.,;!?])|grenades?\b|ieds?\b|napalm\b|nerve agents?\b|sarin\b|ricin\b|anthrax\b|` +
			`chemical weapons?\b|biological weapons?\b|bioweapons?\b)`),
	},
	{
		what: "writing malware",
		pattern: regexp.MustCompile(`\b(?:write|create|build|make|develop|code|generate|program)\s+(?:me\s+)?(?:(?:a|an|some)\s+)?` +
			`(?:(?:new|working|simple|custom|undetectable|stealthy|polymorphic|self-replicating|python|powershell|windows|android|linux)\s+)*` +
			`(?:malware|ransomware|keyloggers?|computer virus(?:es)?|botnets?|spyware|rootkits?)\b`),
	},
	{
		what: "destroying the host",
		pattern: regexp.MustCompile(`\brm\s+(?:-{1,2}[\w-]+\s+)*(?:/|/\*|~|~/|~/\*|\$home/?\*?)(?:[\s;&|'"` + "`" + `)]|$)` +
			`|--no-preserve-root\b` +
			`|\bmkfs(?:\.\w+)?\s+(?:-\S+\s+)*/dev/` +
			`|\bdd\s+.*\bof=/dev/(?:sd|hd|nvme|xvd|vd|disk|mmcblk)` +
			`|:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:` +
			`|\b(?:delete|wipe|erase|destroy)\s+(?:everything|all(?:\s+the)?\s+files|the\s+(?:entire|whole)\s+(?:file\s*system|disk|drive))\s+` +
			`on\s+(?:the|this|your)\s+(?:host|server|machine|system)\b`),
	},
	{
		what: "stealing credentials",
		pattern: regexp.MustCompile(`(?:^|[.!?]\s+|\b(?:how (?:do|can|could|would|should) i|how to|help me|i want to|i need to|teach me (?:how )?to|show me how to|(?:script|code|program|tool|way) (?:to|that can))\s+)` +
			`(?:steal|harvest|exfiltrate|phish)\s+(?:\S+\s+){0,4}?` +
			`(?:passwords?|credentials|logins?|login details|api keys?|access tokens?|tokens|session cookies|cookies|credit cards?|credit card numbers|ssh keys?|private keys?)\b` +
			`|\b(?:create|build|make|write|design|set up|host)\s+(?:me\s+)?(?:(?:a|an)\s+)?(?:phishing (?:page|site|website|kit)|fake login (?:page|site|form))s?\b` +
			`|\b(?:hack|break)\s+into\s+(?:someone(?:'s| else's)|somebody's|another (?:person|user)'s|(?:my\s+)?(?:ex|boss|neighbou?r|wife|husband|girlfriend|boyfriend|partner)(?:'s)?|his|her|their)\s+` +
			`(?:\S+\s+)?(?:account|email|phone|instagram|facebook|computer)\b`),
	},
}

// unsafeRule reports which deny-list rule the goal matches, if any.
func unsafeRule(goal string) (string, bool) {
	text := strings.ToLower(strings.ReplaceAll(goal, "’", "'"))
	text = benignCompounds.ReplaceAllString(text, "benign")
	for _, r := range denyList {
		if r.pattern.MatchString(text) {
			return r.what, true
		}
	}
	return "", false
}
