// A real OpenID Connect provider for the sign-in tests: panva's oidc-provider (certified by the
// OpenID Foundation) with one client and a few accounts whose `groups` claim the console maps
// to roles. Its built-in development login form accepts an account name (no password); the
// consent is asked once. Test-only: started by tests/platform/test_oidc_signin.py.
//
//   node tools/oidc_provider.mjs PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI ACCOUNTS_JSON
//
// ACCOUNTS_JSON: {"alice": {"email": "...", "groups": ["aurora-admins"]}, ...}. Prints "ready"
// once it listens.
import Provider from "oidc-provider";

const [port, clientId, clientSecret, redirectUri, accountsJson] = process.argv.slice(2);
const accounts = JSON.parse(accountsJson);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      response_types: ["code"],
      grant_types: ["authorization_code"],
      token_endpoint_auth_method: "client_secret_post",
    },
  ],
  claims: { openid: ["sub"], email: ["email"], profile: ["preferred_username"], groups: ["groups"] },
  scopes: ["openid", "email", "profile", "groups"],
  conformIdTokenClaims: false, // the claims asked by scope are in the ID token too
  async findAccount(ctx, id) {
    if (!accounts[id]) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, email: accounts[id].email, groups: accounts[id].groups };
      },
    };
  },
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => false },
});
provider.proxy = false;
provider.listen(Number(port), "127.0.0.1", () => console.log("ready"));
