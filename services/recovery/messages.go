package recovery

// User-facing messages. The first three are the decision-engine contract's canned texts.
const (
	msgLLMFailure      = "I'm having trouble processing your request. Please try again."
	msgRateLimited     = "I'm receiving too many requests. Please wait a moment."
	msgTooComplex      = "That request is too complex. Could you break it into smaller steps?"
	msgToolTimeout     = "A tool is taking longer than expected, so I'm trying again with more time."
	msgToolTimedOut    = "A tool took too long, and running it again could repeat what it did, so I'll continue without it."
	msgToolFailed      = "A tool I used failed, so I'm trying another way."
	msgToolCallFixed   = "I made a mistake calling a tool, and I'm correcting it."
	msgToolMissing     = "I tried to use a tool that isn't available, so I'll try another way."
	msgUserRejected    = "Understood, I won't do that and will continue without it."
	msgApprovalTimeout = "The action wasn't approved in time, so I'll continue without it."
	msgNoMemory        = "I can't reach my memory right now, so I'll continue without it."
	msgUnclear         = "I'm not sure what you'd like me to do. Could you rephrase or add more detail?"
	msgUnsafe          = "I can't help with that request."
	msgNoPlan          = "I don't have the tools needed to complete that request."
	msgContextOverflow = "This conversation has become too long for me to continue. Please start a new one or shorten your request."
	msgMemoryFull      = "Your saved memory is full. Please delete some memories and try again."
	msgMaxTokens       = "My answer would be too long. Could you narrow the request down?"
	msgPermission      = "I'm not allowed to perform that action."
	msgInvalidInput    = "Part of your request is invalid, so I couldn't process it. Please check it and try again."
	msgUnknown         = "Something unexpected went wrong. How would you like me to proceed?"
	msgBusy            = "A part of the system is restarting, so I'm trying again in a moment."
	msgGaveUp          = "I couldn't complete that step after several attempts, so I've stopped. Please try again later."
	msgToolResultBad   = "A tool returned a result in a form it doesn't promise, so I stopped rather than guess."
	msgTooMuchOutput   = "A tool returned more data than I can read. How would you like me to proceed?"
)
