package github

import (
	"context"
	"errors"
)

// App is what a client authenticated as the App needs to act as one
// elsewhere: the runner scale set client (github.com/actions/scaleset)
// signs its own JWTs and asks for its own installation tokens.
type App struct {
	ID            int64
	PrivateKeyPEM []byte
}

// App returns the App's credentials; an error for a token client (the
// scale set mode needs an App).
func (c *Client) App() (App, error) {
	if c.app == nil {
		return App{}, errors.New("github: the scale-set mode needs a GitHub App (appId and privateKey), not a token")
	}
	return App{ID: c.cfg.AppID, PrivateKeyPEM: c.cfg.PrivateKeyPEM}, nil
}

// InstallationID is the id of the App's installation on owner ("acme" or
// "acme/api"), looked up once (ErrNotInstalled when there is none).
func (c *Client) InstallationID(ctx context.Context, owner string) (int64, error) {
	o, _, err := c.owner(ctx, owner)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.installIDs[o.String()], nil
}
