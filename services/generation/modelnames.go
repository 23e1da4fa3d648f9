package generation

import "sync"

// maxModelNames is how many distinct provider/model pairs the metrics name; the models of
// later pairs are labelled otherModel. A run may name any model of a configured provider, so
// without a bound every made-up model name would add metric series.
const maxModelNames = 100

// otherModel is the model label of the pairs past maxModelNames.
const otherModel = "_OTHER"

// modelNames hands out the model label of each provider/model pair: its model name for the
// first maxModelNames pairs seen, otherModel after that. It is safe for concurrent use.
type modelNames struct {
	mu   sync.Mutex
	seen map[[2]string]bool
}

// label returns the model label of provider's model.
func (n *modelNames) label(provider, model string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := [2]string{provider, model}
	if n.seen[key] {
		return model
	}
	if len(n.seen) >= maxModelNames {
		return otherModel
	}
	if n.seen == nil {
		n.seen = map[[2]string]bool{}
	}
	n.seen[key] = true
	return model
}
