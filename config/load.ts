/**
 * Loads a CampaignConfig from YAML or JSON plus overrides ("trainer.learningRate=1e-3"). Errors name the
 * field path, the bad value and what is allowed (the field's description), so a typo never silently
 * becomes a default.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { z } from 'zod';
import { CampaignConfigSchema, CONFIG_SECTIONS, type CampaignConfig } from '../schemas/config';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

function getAt(obj: unknown, p: PropertyKey[]): unknown {
  let cur = obj;
  for (const k of p) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[k];
  }
  return cur;
}

/** The description of a config field ("section.field"), for "what is allowed". */
function describeAt(p: PropertyKey[]): string | undefined {
  const [section, field] = p.map(String);
  const sectionSchema = section ? CONFIG_SECTIONS[section as keyof typeof CONFIG_SECTIONS] : undefined;
  if (!sectionSchema) return undefined;
  if (field === undefined) return sectionSchema.description;
  return (sectionSchema.shape as Record<string, z.ZodType>)[field]?.description;
}

export function formatConfigIssues(error: z.ZodError, input: unknown, source: string): string {
  const lines = error.issues.map((issue) => {
    const p = issue.path;
    const field = p.join('.') || '(root)';
    const value = getAt(input, p);
    const got = value === undefined ? 'missing' : `got ${JSON.stringify(value)}`;
    const allowed = describeAt(p);
    const extra =
      issue.code === 'unrecognized_keys'
        ? `unknown field(s) ${issue.keys.map((k) => `"${[...p, k].join('.')}"`).join(', ')}: check the spelling (see docs/configuration.md)`
        : `${got}; ${issue.message}`;
    return `  - ${field}: ${extra}${allowed && issue.code !== 'unrecognized_keys' ? ` — ${allowed}` : ''}`;
  });
  return `Invalid campaign config (${source}):\n${lines.join('\n')}`;
}

export function parseCampaignConfig(input: unknown, source = 'config'): CampaignConfig {
  const parsed = CampaignConfigSchema.safeParse(input);
  if (!parsed.success) throw new ConfigError(formatConfigIssues(parsed.error, input, source));
  return parsed.data;
}

/** "a.b.c=value" → sets input.a.b.c, the value parsed as JSON/YAML scalar when possible. */
export function applyOverride(target: Record<string, unknown>, override: string): void {
  const eq = override.indexOf('=');
  if (eq <= 0)
    throw new ConfigError(`Invalid override "${override}": expected field.path=value, e.g. trainer.learningRate=1e-3`);
  const keyPath = override.slice(0, eq).split('.');
  const value: unknown = YAML.parse(override.slice(eq + 1));
  let cur: Record<string, unknown> = target;
  for (const k of keyPath.slice(0, -1)) {
    const next = cur[k];
    if (next === undefined) cur[k] = {};
    else if (typeof next !== 'object' || next === null)
      throw new ConfigError(`Invalid override "${override}": ${k} is not a section`);
    cur = cur[k] as Record<string, unknown>;
  }
  cur[keyPath[keyPath.length - 1]!] = value;
}

export function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`Cannot read config file ${file}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = path.extname(file) === '.json' ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new ConfigError(
      `Config file ${file} is not valid ${path.extname(file) === '.json' ? 'JSON' : 'YAML'}: ${(err as Error).message}`
    );
  }
  if (raw === null || raw === undefined) return {};
  if (typeof raw !== 'object' || Array.isArray(raw))
    throw new ConfigError(`Config file ${file} must contain an object of sections`);
  return raw as Record<string, unknown>;
}

export function loadCampaignConfig(file?: string, overrides: string[] = []): CampaignConfig {
  const input = file ? readConfigFile(file) : {};
  for (const o of overrides) applyOverride(input, o);
  return parseCampaignConfig(input, file ? `${file}${overrides.length ? ' + overrides' : ''}` : 'overrides');
}
