/**
 * An example function module for servers.json `functions` (README "Function tools"):
 *
 *   "functions": ["./tools/weather.js"]
 *
 * It serves one tool, `get_weather`, advertised under that bare name. The forecast is made up,
 * deterministically, from the city's name: no network, the same answer every time.
 */
import { z } from 'zod';
import { defineFunctionTool, ToolDeniedError } from 'mcp-broker';

const CONDITIONS = ['sunny', 'cloudy', 'rain', 'fog', 'snow', 'wind'];

export const getWeather = defineFunctionTool({
  name: 'get_weather',
  title: 'Weather forecast (example)',
  description: 'A made-up but deterministic forecast for a city: temperature and conditions for the next days.',
  parameters: z.object({
    city: z.string().trim().min(1).describe('City name'),
    units: z.enum(['celsius', 'fahrenheit']).default('celsius'),
    days: z.number().int().min(1).max(7).default(3).describe('How many days, 1 to 7'),
  }),
  annotations: { readOnlyHint: true, openWorldHint: false },
  handler({ city, units, days }) {
    if (city.toLowerCase() === 'atlantis') throw new ToolDeniedError('no forecasts for sunken cities');
    let seed = 0;
    for (const ch of city.toLowerCase()) seed = (seed * 31 + ch.codePointAt(0)) % 1_000_003;
    const forecast = Array.from({ length: days }, (_, day) => {
      const celsius = ((seed + day * 7) % 35) - 5;
      return {
        day: day + 1,
        temperature: units === 'celsius' ? celsius : Math.round(celsius * 1.8 + 32),
        conditions: CONDITIONS[(seed + day) % CONDITIONS.length],
      };
    });
    return { city, units, forecast };
  },
});

export default [getWeather];
