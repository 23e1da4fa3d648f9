package lru

import "container/list"

// Cache is a map of at most size entries that evicts the least recently used ones. It is not
// safe for concurrent use.
type Cache[K comparable, V any] struct {
	size    int
	order   *list.List // front = most recently used; values are *entry[K, V]
	items   map[K]*list.Element
	evicted func(K, V)
}

// entry is one key and its value.
type entry[K comparable, V any] struct {
	key   K
	value V
}

// New returns an empty cache of at most size entries. evicted, when not nil, is called with
// each entry Put evicts to make room (not with those Remove drops or Put replaces).
func New[K comparable, V any](size int, evicted func(K, V)) *Cache[K, V] {
	return &Cache[K, V]{
		size: size, order: list.New(), items: map[K]*list.Element{}, evicted: evicted,
	}
}

// Get returns the value of k, now the most recently used entry, or false.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	el, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).value, true
}

// Put sets the value of k, now the most recently used entry, and evicts the least recently
// used entries while there are more than size.
func (c *Cache[K, V]) Put(k K, v V) {
	if el, ok := c.items[k]; ok {
		el.Value.(*entry[K, V]).value = v
		c.order.MoveToFront(el)
	} else {
		c.items[k] = c.order.PushFront(&entry[K, V]{key: k, value: v})
	}
	for c.order.Len() > c.size {
		e := c.order.Remove(c.order.Back()).(*entry[K, V])
		delete(c.items, e.key)
		if c.evicted != nil {
			c.evicted(e.key, e.value)
		}
	}
}

// Remove drops k, and reports whether it was there.
func (c *Cache[K, V]) Remove(k K) bool {
	el, ok := c.items[k]
	if ok {
		c.order.Remove(el)
		delete(c.items, k)
	}
	return ok
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int { return c.order.Len() }
