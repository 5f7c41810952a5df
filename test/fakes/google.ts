/**
 * Everything a Google-side test needs, started together on 127.0.0.1: a
 * service-account key, the OAuth token endpoint fake, and the Cloud
 * Monitoring fakes (REST and gRPC) over one shared store.
 */
import { startOAuthFake, type OAuthFake } from "./google-oauth.ts";
import { makeServiceAccount, type TestServiceAccount } from "./google-key.ts";
import { startMonitoringGrpcFake, type MonitoringGrpcFake } from "./monitoring-grpc.ts";
import { startMonitoringRestFake, type MonitoringRestFake } from "./monitoring-rest.ts";
import { MonitoringStore } from "./monitoring-store.ts";

/** The running Google fakes. */
export interface GoogleFakes {
  store: MonitoringStore;
  oauth: OAuthFake;
  rest: MonitoringRestFake;
  grpc: MonitoringGrpcFake;
  /** the key the bridge uses (its `token_uri` is the OAuth fake) */
  account: TestServiceAccount;
  close(): Promise<void>;
}

/**
 * Start the fakes. `now` is the clock the token endpoint checks assertions
 * against (the bridge's clock in tests that inject one).
 */
export async function startGoogleFakes(now: () => number = Date.now): Promise<GoogleFakes> {
  const store = new MonitoringStore();
  const oauth = await startOAuthFake(now);
  const account = makeServiceAccount(oauth.tokenUri);
  oauth.allow(account.json.client_email, account.publicKey);
  const rest = await startMonitoringRestFake(store, oauth);
  const grpc = await startMonitoringGrpcFake(store, new Map([[account.json.client_email, account.publicKey]]), oauth.issued);
  return {
    store,
    oauth,
    rest,
    grpc,
    account,
    close: async () => {
      await Promise.all([oauth.close(), rest.close(), grpc.close()]);
    },
  };
}
