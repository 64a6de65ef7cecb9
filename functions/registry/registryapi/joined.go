package registryapi

import "sync"

// joinedCache remembers, per agent, the worlds this instance last found
// it joined, so that a presence change reads those worlds' members beside
// its first read (ownsWithWorlds) instead of after listing them. It only
// guesses: the listing still runs beside, and decides. Safe for
// concurrent use; bounded: when full, an arbitrary entry makes room.
type joinedCache struct {
	mu     sync.Mutex
	max    int
	worlds map[string][]string
}

// joinedCacheSize bounds joinedCache: 4096 agents.
const joinedCacheSize = 4096

func newJoinedCache() *joinedCache {
	return &joinedCache{max: joinedCacheSize, worlds: map[string][]string{}}
}

func (c *joinedCache) get(awnID string) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.worlds[awnID]
	return w, ok
}

func (c *joinedCache) put(awnID string, worlds []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.worlds[awnID]; !ok && len(c.worlds) >= c.max {
		for k := range c.worlds {
			delete(c.worlds, k)
			break
		}
	}
	c.worlds[awnID] = worlds
}
