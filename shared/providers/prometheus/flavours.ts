/**
 * The flavours of the `prometheus` provider besides `generic`, by name: the
 * one list `./index.ts` builds a flavour's access from. Each is a module of
 * this folder named as its `flavour:` value, exporting `flavour` (a
 * `FlavourFactory`, `./flavour.ts`). A Worker built for a config
 * (`infra/worker/build.ts --config`) replaces this module by a table of the
 * same shape holding only the flavours that config uses, so a generic-only
 * Worker carries neither the SigV4 signer nor the Google token code
 * (docs/providers/prometheus.md, "Bundle size").
 */
import { flavour as amp } from "./amp.ts";
import type { FlavourFactory } from "./flavour.ts";
import { flavour as gmp } from "./gmp.ts";

/** Every flavour but `generic`, by its `flavour:` value. */
export const FLAVOURS: Readonly<Record<string, FlavourFactory>> = { amp, gmp };
