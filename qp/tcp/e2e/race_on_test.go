//go:build race

package e2e_test

// raceEnabled says the race detector is on: the netns tests then move less
// and assert no rate (the detector slows every copy several times).
const raceEnabled = true
