/**
 * The project's zod: the tree-shakable `zod/mini` API with zod's English
 * messages loaded (`config(en())`). The classic API registers English when
 * its first schema is built (zod `v4/classic/schemas.js`); `zod/mini` loads no
 * locale, and without one every issue would read only "Invalid input". Every
 * schema of the project (bridge config, policy, providers, proxy config)
 * imports zod through this module (`import * as z from "…/config/zod.ts"`),
 * so the messages a user sees ("Too small: expected string to have >=1
 * characters", "Invalid option: expected one of …") are the classic API's on
 * every runtime, the Worker included, whose bundle keeps only the functions
 * used (docs/deploy.md, "Bundle size"). The locale costs 1.2 KiB gzip there.
 */
import { config } from "zod/mini";
import { en } from "zod/locales";

config(en());

export * from "zod/mini";
