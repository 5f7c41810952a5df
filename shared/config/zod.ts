/**
 * The project's zod: the tree-shakable `zod/mini` API with zod's English
 * messages loaded (`z.config(en())`; `zod/mini` loads no locale, and without
 * one every issue would read only "Invalid input"). Every bridge schema
 * imports zod through this module (`import * as z from "…/config/zod.ts"`),
 * so the messages a user sees ("Too small: expected string to have >=1
 * characters", "Invalid option: expected one of …") are the same on every
 * runtime and in the Worker, whose bundle keeps only the functions used
 * (docs/deploy.md, "Bundle size").
 *
 * Source: https://zod.dev/packages/mini ("Locales": "No locale is loaded
 * by default"), zod `v4/mini/external.ts`.
 */
import { config } from "zod/mini";
import { en } from "zod/locales";

config(en());

export * from "zod/mini";
