/**
 * @peculiar/x509 with what it needs loaded first: the `reflect-metadata`
 * polyfill (its dependency injection container, tsyringe, requires it) and
 * WebCrypto as its crypto provider. Every proxy module imports X.509 from here.
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(globalThis.crypto);

export { x509 };
