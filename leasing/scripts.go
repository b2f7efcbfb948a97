package leasing

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

var (
	//go:embed lua/prelude.lua
	preludeLua string
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/complete.lua
	completeLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/team_acquire.lua
	teamAcquireLua string
	//go:embed lua/team_renew.lua
	teamRenewLua string
	//go:embed lua/team_count.lua
	teamCountLua string
	//go:embed lua/team_rate.lua
	teamRateLua string
)

// script is a Lua script called by its SHA1 digest. The digest is computed
// here, so EVALSHA can be sent before any SCRIPT LOAD; a NOSCRIPT reply makes
// the store load the source and call again.
type script struct {
	name string
	src  string
	sha  string
}

func newScript(name, body string) *script {
	src := preludeLua + "\n" + body
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// scripts are the store's Lua scripts. Each Store has its own set, so nothing
// lives at package level.
type scripts struct {
	acquire, renew, complete, release *script
	// The team slots (teamslots.go).
	teamAcquire, teamRenew, teamCount *script
	// The team's runs started per minute (teamrate.go).
	teamRate *script
}

func newScripts() scripts {
	return scripts{
		acquire:  newScript("acquire", acquireLua),
		renew:    newScript("renew", renewLua),
		complete: newScript("complete", completeLua),
		release:  newScript("release", releaseLua),

		teamAcquire: newScript("team_acquire", teamAcquireLua),
		teamRenew:   newScript("team_renew", teamRenewLua),
		teamCount:   newScript("team_count", teamCountLua),
		teamRate:    newScript("team_rate", teamRateLua),
	}
}

func (s scripts) all() []*script {
	return []*script{s.acquire, s.renew, s.complete, s.release, s.teamAcquire, s.teamRenew, s.teamCount, s.teamRate}
}
