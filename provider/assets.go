package provider

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// embedded holds what `make build` put in provider/assets; in a fresh clone
// only its README. Dotfiles (mkbundle's temporary files) are left out.
//
//go:embed assets
var embedded embed.FS

// assets is what resources read; tests swap it to see the missing-bundle path.
var assets fs.FS = mustSub(embedded, "assets")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the directory is part of the source tree
	}
	return sub
}

// errNoBundle is the plan-time message of a provider built without artifacts.
var errNoBundle = errors.New("built without bundle: run make build (it builds the Lambda bundle and the agent into provider/assets and then the provider)")

// asset is one embedded artifact with its hashes.
type asset struct {
	data []byte
	// sha256Hex is what the user data checks the agent against; sha256B64 is
	// Lambda's CodeSha256 of a zip.
	sha256Hex, sha256B64 string
}

func loadAsset(name string) (asset, error) {
	data, err := fs.ReadFile(assets, name)
	if errors.Is(err, fs.ErrNotExist) {
		return asset{}, errNoBundle
	}
	if err != nil {
		return asset{}, err
	}
	sum := sha256.Sum256(data)
	return asset{data: data, sha256Hex: hex.EncodeToString(sum[:]), sha256B64: base64.StdEncoding.EncodeToString(sum[:])}, nil
}

func functionAsset(arch string) (asset, error) { return loadAsset(bundle.FunctionZip(arch)) }
func agentAsset(arch string) (asset, error)    { return loadAsset(bundle.Agent(arch)) }
