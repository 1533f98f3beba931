package github

import (
	"context"
	"fmt"
	"time"

	gh "github.com/google/go-github/v62/github"
)

// Registration and remove tokens of an owner, cached until shortly before
// they expire.

const tokenMargin = 5 * time.Minute

// RegistrationToken returns a runner registration token for owner (1 h
// validity), cached until 5 minutes before it expires.
func (c *Client) RegistrationToken(ctx context.Context, owner string) (string, time.Time, error) {
	return c.token(ctx, owner, "registration")
}

// RemoveToken returns a runner remove token for owner, cached likewise.
func (c *Client) RemoveToken(ctx context.Context, owner string) (string, time.Time, error) {
	return c.token(ctx, owner, "remove")
}

func (c *Client) token(ctx context.Context, owner, kind string) (string, time.Time, error) {
	o, err := ParseOwner(owner)
	if err != nil {
		return "", time.Time{}, err
	}
	key := kind + " " + o.String()
	if t, ok := c.cachedToken(key); ok {
		return t.token, t.expires, nil
	}
	v, err, _ := c.flight.Do(key, func() (any, error) {
		if t, ok := c.cachedToken(key); ok { // filled while we queued
			return t, nil
		}
		cl, err := c.forOwner(ctx, o)
		if err != nil {
			return nil, err
		}
		var t *gh.RegistrationToken
		switch {
		case kind == "registration" && o.IsRepo():
			t, _, err = cl.Actions.CreateRegistrationToken(ctx, o.Org, o.Repo)
		case kind == "registration":
			t, _, err = cl.Actions.CreateOrganizationRegistrationToken(ctx, o.Org)
		case o.IsRepo():
			var rt *gh.RemoveToken
			rt, _, err = cl.Actions.CreateRemoveToken(ctx, o.Org, o.Repo)
			t = removeAsRegistration(rt)
		default:
			var rt *gh.RemoveToken
			rt, _, err = cl.Actions.CreateOrganizationRemoveToken(ctx, o.Org)
			t = removeAsRegistration(rt)
		}
		if err != nil {
			return nil, fmt.Errorf("create a runner %s token for %s: %w", kind, o, classify(err))
		}
		ct := cachedToken{token: t.GetToken(), expires: t.GetExpiresAt().Time}
		if ct.token == "" {
			return nil, fmt.Errorf("create a runner %s token for %s: GitHub answered without a token", kind, o)
		}
		c.mu.Lock()
		c.tokens[key] = ct
		c.mu.Unlock()
		return ct, nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	ct := v.(cachedToken)
	return ct.token, ct.expires, nil
}

func removeAsRegistration(t *gh.RemoveToken) *gh.RegistrationToken {
	if t == nil {
		return nil
	}
	return &gh.RegistrationToken{Token: t.Token, ExpiresAt: t.ExpiresAt}
}

func (c *Client) cachedToken(key string) (cachedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tokens[key]
	return t, ok && t.expires.Sub(c.cfg.Now()) > tokenMargin
}
