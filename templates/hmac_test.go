package templates

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
)

// hmacShell is the user data's hexof and hmac, as rendered.
func hmacShell(t *testing.T) string {
	t.Helper()
	out, err := Render(valid())
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(out), "\nhexof() {")
	body, _, ok2 := strings.Cut(rest, "\n# One try")
	if !ok || !ok2 {
		t.Fatal("the user data has no hexof and hmac before the download")
	}
	return "hexof() {" + body + "\n"
}

// Issue 39 item 12: the user data's HMAC-SHA256 states that its key fits
// SHA-256's 64-byte block. It is RFC 2104's for every key SigV4 gives it
// ("AWS4" and a 40-character secret, then 32-byte MACs) up to a full
// block, and refuses a longer key (which RFC 2104 would hash first) rather
// than answer a wrong MAC.
func TestTheUserDatasHMACIsRFC2104UpToABlockAndRefusesALongerKey(t *testing.T) {
	funcs := hmacShell(t)
	run := func(key []byte, data string) (string, string, error) {
		script := funcs + `log() { echo "log: $*"; }
hexof "$1"; [ "$hex" = "$2" ] || { echo "hexof: $hex"; exit 3; }
hmac "$2" "$3" || exit 1
printf '%s' "$mac"`
		out, err := exec.Command("bash", "-c", script, "hmac", string(key), hex.EncodeToString(key), data).CombinedOutput()
		return string(out), hex.EncodeToString(key), err
	}
	for _, key := range [][]byte{
		[]byte("AWS4" + secret), []byte("AWS4wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
		[]byte(strings.Repeat("k", 32)), []byte(strings.Repeat("K", 64)),
	} {
		want := hmac.New(sha256.New, key)
		want.Write([]byte("AWS4-HMAC-SHA256\n20260101T000000Z\nline ü"))
		got, keyHex, err := run(key, "AWS4-HMAC-SHA256\n20260101T000000Z\nline ü")
		if err != nil || got != hex.EncodeToString(want.Sum(nil)) {
			t.Errorf("key %s (%d bytes): %q, %v; want %x", keyHex, len(key), got, err, want.Sum(nil))
		}
	}
	got, _, err := run([]byte(strings.Repeat("K", 65)), "data")
	if err == nil || !strings.Contains(got, "longer than SHA-256's 64-byte block") {
		t.Errorf("a 65-byte key: %q, %v; want refused, saying why", got, err)
	}
}
