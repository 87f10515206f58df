package config

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// CacheAccess is what a pool's jobs may do with the stack's compiler cache (the pool's
// compilerCache field): read and write it, read only, or nothing.
type CacheAccess string

const (
	// CacheReadWrite: the pool's builds read the cache and fill it. For pools whose runner
	// group admits only the organization's own repositories: whatever a job writes, a later
	// build of any of them may link.
	CacheReadWrite CacheAccess = "read-write"
	// CacheReadOnly: the pool's builds hit what another pool's builds wrote
	// (compilerCacheFrom) and write nothing. For pools that run code from public repositories
	// or fork pull requests: a write could plant an object a trusted build would link.
	CacheReadOnly CacheAccess = "read-only"
	// CacheNone: no compiler cache.
	CacheNone CacheAccess = "none"
)

// DefaultCompilerCacheExpiryDays is how long an object of the cache may go unused before S3
// expires it (compilerCacheExpiryDays).
const DefaultCompilerCacheExpiryDays = 14

// DefaultCompilerCacheWriteRefs: only main's jobs write (compilerCacheWriteRefs). A pull
// request's job runs code its author chose; what it wrote, main's build would link.
var DefaultCompilerCacheWriteRefs = []string{"refs/heads/main"}

// CompilerCacheService is one of the stack's compiler cache services: a cache server on the
// system nodes for one pool (and its twin), holding the bucket's credentials for Prefix. A
// read-write pool's service reads and writes its own prefix; a read-only pool's reads the
// prefix of the pool it reads from, and its server takes no write.
type CompilerCacheService struct {
	// Name is the pool's name, and so the service's (k8s: ccache-<Name>).
	Name string
	// Prefix is the bucket prefix it serves: the name of the pool whose builds fill it.
	Prefix string
	Access CacheAccess
	// WriteRefs are the refs whose jobs write (none on a read-only service); Shared serves one
	// repository's entries to all (the writing pool's compilerCacheShared).
	WriteRefs []string
	Shared    bool
	// PodNamespaces are where the pods of the pools that use it run (its gate looks its
	// callers up there).
	PodNamespaces []string
}

// Writes tells whether the service writes to the bucket.
func (s CompilerCacheService) Writes() bool { return s.Access == CacheReadWrite }

// CompilerCacheService is the service the pool's pods use ("" for none): the pool's own, or,
// on a twin, its pool's (a twin runs its pool's jobs again).
func (p GPUPool) CompilerCacheService() string {
	if p.CompilerCache == CacheNone {
		return ""
	}
	return p.JobsOf()
}

// CompilerCaches are the stack's compiler cache services, one per pool that has a cache (a
// twin shares its pool's); none when no pool has one, and then the stack has no bucket.
func (c *Config) CompilerCaches() []CompilerCacheService {
	var out []CompilerCacheService
	for _, p := range c.GPUPools {
		if p.CompilerCache == CacheNone {
			continue
		}
		svc := CompilerCacheService{Name: p.Name, Prefix: p.Name, Access: p.CompilerCache, Shared: p.CompilerCacheShared, WriteRefs: c.CompilerCacheWriteRefs}
		if p.CompilerCache == CacheReadOnly {
			svc.Prefix, svc.WriteRefs = p.CompilerCacheFrom, nil
			if i := slices.IndexFunc(c.GPUPools, func(o GPUPool) bool { return o.Name == p.CompilerCacheFrom }); i >= 0 {
				svc.Shared = c.GPUPools[i].CompilerCacheShared // its keys are the writer's
			}
		}
		var users []GPUPool // the pool and its twin
		for _, o := range c.GPUPools {
			if o.CompilerCacheService() == p.Name {
				users = append(users, o)
			}
		}
		svc.PodNamespaces = RunnerPodNamespaces(users)
		out = append(out, svc)
	}
	return out
}

// compilerCacheProblems checks the pools' compilerCache fields against each other: a
// read-only pool reads a read-write pool's cache, since nothing else would ever fill it.
func compilerCacheProblems(pool GPUPool, pools []GPUPool) []fieldProblem {
	var out []fieldProblem
	switch pool.CompilerCache {
	case CacheReadWrite, CacheNone:
		if pool.CompilerCacheFrom != "" {
			out = append(out, fieldProblem{"compilerCacheFrom", fmt.Sprintf("%q is set, but only a read-only pool reads another pool's cache (compilerCache is %q)", pool.CompilerCacheFrom, pool.CompilerCache)})
		}
	case CacheReadOnly:
		if pool.CompilerCacheShared {
			out = append(out, fieldProblem{"compilerCacheShared", fmt.Sprintf("is set on a read-only pool: it reads pool %s's entries as that pool's builds wrote them, so set compilerCacheShared there", pool.CompilerCacheFrom)})
		}
		from := pool.CompilerCacheFrom
		i := slices.IndexFunc(pools, func(o GPUPool) bool { return o.Name == from })
		switch {
		case from == "":
			out = append(out, fieldProblem{"compilerCacheFrom", "is not set, and nothing ever writes a read-only pool's own cache: name the read-write pool whose builds this pool's should hit (its main-branch builds, say), or make compilerCache read-write"})
		case i < 0:
			out = append(out, fieldProblem{"compilerCacheFrom", fmt.Sprintf("%q is not a pool of the stack", from)})
		case pools[i].CompilerCache != CacheReadWrite:
			out = append(out, fieldProblem{"compilerCacheFrom", fmt.Sprintf("pool %s's cache is %q: a read-only pool reads a read-write pool's, which its builds fill", from, pools[i].CompilerCache)})
		}
	default:
		out = append(out, fieldProblem{"compilerCache", fmt.Sprintf("%q must be %q, %q or %q", pool.CompilerCache, CacheReadWrite, CacheReadOnly, CacheNone)})
	}
	return out
}

// validateCompilerCache: the expiry is a whole number of days S3's lifecycle accepts.
func (c *Config) validateCompilerCache(p *parser) {
	if d := c.CompilerCacheExpiryDays; d < 1 || d > 3650 {
		p.fail(KeyCompilerCacheExpiryDays, fmt.Sprintf("%d must be between 1 and 3650: the days an object may go unused before S3 expires it", d), fmt.Sprint(DefaultCompilerCacheExpiryDays))
	}
	for _, r := range c.CompilerCacheWriteRefs {
		if _, err := path.Match(r, ""); err != nil || !strings.HasPrefix(r, "refs/") || strings.HasPrefix(r, "refs/pull/") {
			p.fail(KeyCompilerCacheWriteRefs, fmt.Sprintf("%q is not a branch or tag ref pattern: a job of a matching ref writes the compiler cache, and a pull request's never may", r), `["refs/heads/main"]`)
		}
	}
}
